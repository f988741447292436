package kafkatest_test

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kconsist/kconsist/integration/kafkatest"
)

// An application principal with ACLs on its own topics and groups only,
// as least privilege would have it: app may create, use and delete topics
// and groups whose names start with "app-", and nothing else, not even
// describe the cluster. admin is allowed everything.
func ExampleAuthorizer() {
	_ = func(t *testing.T) {
		app := kafkatest.SASLUser{Name: "app", Password: "app-secret"}
		admin := kafkatest.SASLUser{Name: "admin", Password: "admin-secret"}
		c := kafkatest.Start(t, kafkatest.Nodes(3), kafkatest.SASLSSL(app, admin), kafkatest.Authorizer(admin.Name))
		acls := kadm.NewACLs().Allow("User:" + app.Name).
			Topics("app-").Groups("app-").ResourcePatternType(kadm.ACLPatternPrefixed).
			Operations(kadm.OpAll)
		if err := c.Grant(context.Background(), acls); err != nil {
			t.Fatal(err)
		}
		// Clients of app connect to c.SecureAddrs() with c.TLSConfig().
	}
}
