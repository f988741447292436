package link

import "github.com/twmb/franz-go/pkg/kgo"

// Admin is what an admin client is made of: the argument of admin.New,
// which factory.Factory.Admin fills with a client the session built and
// seals (Seal): admin.New refuses a value that is not sealed, so only the
// factory can make an admin client. The admin client owns Client and
// closes it.
type Admin struct {
	// Client is the franz-go client every kadm request goes through.
	Client *kgo.Client

	seal
}
