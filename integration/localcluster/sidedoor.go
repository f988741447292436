package localcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// The gateways reach their kfake brokers through a side door: each kfake
// broker listens on its TCP port (KfakeAddrs, for anyone who wants kfake
// itself) and also on a unix socket, which the gateway and the control
// client dial. A unix socket pair skips the TCP stack, and the gateway's
// extra hop is most of what it costs next to kfake direct.

// sideDoors maps kfake TCP addresses to the unix sockets beside them.
type sideDoors struct {
	dir    string
	dialer net.Dialer
	mu     sync.Mutex
	paths  map[string]string
}

func newSideDoors() (*sideDoors, error) {
	dir, err := os.MkdirTemp("", "localcluster-")
	if err != nil {
		return nil, fmt.Errorf("localcluster: side door dir: %w", err)
	}
	return &sideDoors{dir: dir, dialer: net.Dialer{Timeout: 5 * time.Second}, paths: map[string]string{}}, nil
}

// listen is kfake's ListenFn: a TCP listener on address, merged with a unix
// listener in the side door directory.
func (s *sideDoors) listen(network, address string) (net.Listener, error) {
	tcp, err := net.Listen(network, address)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	path := filepath.Join(s.dir, fmt.Sprintf("b%d.sock", len(s.paths)))
	s.paths[tcp.Addr().String()] = path
	s.mu.Unlock()
	unix, err := net.Listen("unix", path)
	if err != nil {
		tcp.Close()
		return nil, err
	}
	return newFanIn(tcp, unix), nil
}

// dial dials the side door of the kfake broker at addr, or addr itself
// when it has none (a kfake made with a ListenFn of the caller's).
func (s *sideDoors) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	s.mu.Lock()
	path, ok := s.paths[addr]
	s.mu.Unlock()
	if ok {
		return s.dialer.DialContext(ctx, "unix", path)
	}
	return s.dialer.DialContext(ctx, network, addr)
}

func (s *sideDoors) close() { os.RemoveAll(s.dir) }

// fanIn accepts from several listeners; its address is the first one's.
type fanIn struct {
	lns   []net.Listener
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
	wg    sync.WaitGroup
}

func newFanIn(lns ...net.Listener) *fanIn {
	f := &fanIn{lns: lns, conns: make(chan net.Conn), done: make(chan struct{})}
	for _, ln := range lns {
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				select {
				case f.conns <- c:
				case <-f.done:
					c.Close()
					return
				}
			}
		}()
	}
	return f
}

func (f *fanIn) Accept() (net.Conn, error) {
	select {
	case c := <-f.conns:
		return c, nil
	case <-f.done:
		return nil, net.ErrClosed
	}
}

func (f *fanIn) Close() error {
	var errs []error
	f.once.Do(func() {
		close(f.done)
		for _, ln := range f.lns {
			errs = append(errs, ln.Close())
		}
		f.wg.Wait()
	})
	return errors.Join(errs...)
}

func (f *fanIn) Addr() net.Addr { return f.lns[0].Addr() }
