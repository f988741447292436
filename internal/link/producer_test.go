package link

import (
	"errors"
	"testing"
)

// client is a ProducerClient whose Join says what closed says.
type client struct {
	closed bool
	joined int
}

func (c *client) Join() bool {
	if c.closed {
		return false
	}
	c.joined++
	return true
}

// TestShare: the first Join makes the client, later ones join it; once
// its last producer closed it (Join false), or Forget dropped it, the next
// Join makes a new one; a failed make leaves the share as it was; Forget
// of another client leaves it alone.
func TestShare(t *testing.T) {
	var s Share
	var made []*client
	mk := func() (ProducerClient, error) {
		c := &client{}
		made = append(made, c)
		return c, nil
	}
	a, err := s.Join(mk)
	if err != nil || a != made[0] {
		t.Fatalf("first Join: %v, %v; want the client made", a, err)
	}
	b, err := s.Join(mk)
	if err != nil || b != a || len(made) != 1 || made[0].joined != 1 {
		t.Fatalf("second Join: %v, %v, %d made, joined %d; want the first client joined", b, err, len(made), made[0].joined)
	}

	made[0].closed = true // its last producer closes it, before Forget
	c, err := s.Join(mk)
	if err != nil || c == a || len(made) != 2 {
		t.Fatalf("Join of a closing client: %v, %v; want a new one", c, err)
	}

	s.Forget(a) // late, for the old client: the new one stays
	if d, _ := s.Join(mk); d != c {
		t.Fatalf("Forget of an old client dropped the current one")
	}
	s.Forget(c)
	boom := errors.New("boom")
	if _, err := s.Join(func() (ProducerClient, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Fatalf("failed make: %v, want %v", err, boom)
	}
	if e, err := s.Join(mk); err != nil || e == c || len(made) != 3 {
		t.Fatalf("Join after Forget: %v, %v; want a new client", e, err)
	}
}
