package cluster

import (
	"runtime"
	"sync"
	"testing"

	"github.com/kconsist/kconsist/consistency"
)

// TestResetUnlessConcurrent has the watcher's reset race connections that
// already store tokens of the new cluster: the reset may only ever wipe the
// old cluster's token, never a newer one of cluster b.
func TestResetUnlessConcurrent(t *testing.T) {
	const conns, trials = 3, 3000
	resets := 0
	for trial := range trials {
		s := yieldingStore{consistency.NewMemoryStore()}
		if _, err := s.Advance(consistency.MustOf("a", 10)); err != nil {
			t.Fatal(err)
		}
		var start, done sync.WaitGroup
		start.Add(1)
		done.Go(func() {
			start.Wait()
			if resetUnless(s, "b") {
				resets++
			}
		})
		for i := range conns {
			done.Go(func() {
				start.Wait()
				consistency.ResetCluster(s, "a")
				if _, err := s.Advance(consistency.MustOf("b", int64(100*(i+1)))); err != nil {
					t.Error(err)
				}
			})
		}
		start.Done()
		done.Wait()
		if got := s.Load(); got != consistency.MustOf("b", 100*conns) {
			t.Fatalf("trial %d: store went backwards to %v, want b@%d", trial, got, 100*conns)
		}
	}
	t.Logf("the watcher reset the store in %d of %d trials", resets, trials)
}

func TestResetUnless(t *testing.T) {
	s := consistency.NewMemoryStore()
	if resetUnless(s, "b") {
		t.Fatal("an Unknown store needs no reset")
	}
	if _, err := s.Advance(consistency.MustOf("b", 3)); err != nil {
		t.Fatal(err)
	}
	if resetUnless(s, "b") || s.Load() != consistency.MustOf("b", 3) {
		t.Fatalf("a token of the kept cluster was reset: %v", s.Load())
	}
	if !resetUnless(s, "c") || !s.Load().IsUnknown() {
		t.Fatalf("a token of another cluster was kept: %v", s.Load())
	}
}

// yieldingStore lets other goroutines run between a Load and what its
// caller does with it, where a check-then-act race would strike.
type yieldingStore struct{ *consistency.MemoryStore }

func (s yieldingStore) Load() consistency.Token {
	c := s.MemoryStore.Load()
	runtime.Gosched()
	return c
}
