package session

import (
	"errors"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// sharedClient is a client made on first use and shared by its users
// (Session.UnstampedClient): each acquire is matched by one release. A
// renewed client is closed once its last user released it; close closes
// the current one at once (its users' requests fail: the session is
// closing) and any made later is refused.
type sharedClient struct {
	mu     sync.Mutex
	cur    *usedClient
	closed bool
}

// errSharedClosed: the session closed its shared client.
var errSharedClosed = errors.New("session: closed")

// usedClient is one client and how many users hold it.
type usedClient struct {
	cl    *kgo.Client
	users int
	shut  bool // cl.Close was called (once)
}

// shutLocked reports whether u, no longer current (renewed or closed), is
// to be closed now: at once when force, else once no user holds it. It
// marks u so that it is closed once. c.mu is held.
func (u *usedClient) shutLocked(force bool) bool {
	if u.shut || !force && u.users > 0 {
		return false
	}
	u.shut = true
	return true
}

// acquire returns the current client, made with newClient when there is
// none, and its release.
func (c *sharedClient) acquire(newClient func() (*kgo.Client, error)) (*kgo.Client, func(), error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, nil, errSharedClosed
	}
	if c.cur == nil {
		cl, err := newClient()
		if err != nil {
			return nil, nil, err
		}
		c.cur = &usedClient{cl: cl}
	}
	u := c.cur
	u.users++
	var once sync.Once
	return u.cl, func() { once.Do(func() { c.release(u) }) }, nil
}

func (c *sharedClient) release(u *usedClient) {
	c.mu.Lock()
	u.users--
	done := c.cur != u && u.shutLocked(false)
	c.mu.Unlock()
	if done {
		u.cl.Close()
	}
}

// renew retires the current client: the next acquire makes a new one.
func (c *sharedClient) renew() { c.retire(false) }

// close closes the current client, used or not, and refuses new ones.
func (c *sharedClient) close() { c.retire(true) }

// retire takes the current client out of use: closed once its last user
// released it, or at once when closing (which refuses new users).
func (c *sharedClient) retire(closing bool) {
	c.mu.Lock()
	u := c.cur
	c.cur = nil
	c.closed = c.closed || closing
	var done bool
	if u != nil {
		done = u.shutLocked(closing)
	}
	c.mu.Unlock()
	if done {
		u.cl.Close()
	}
}
