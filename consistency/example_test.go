package consistency_test

import (
	"errors"
	"fmt"

	"github.com/kconsist/kconsist/consistency"
)

func ExampleToken_Later() {
	seen := consistency.MustOf("MkU3OEVBNTcwNTJENDM2Qk", 41)
	fresh := consistency.MustOf("MkU3OEVBNTcwNTJENDM2Qk", 57)
	latest, _ := seen.Later(fresh)
	fmt.Println(latest)

	_, err := seen.Later(consistency.MustOf("another-cluster", 1))
	fmt.Println(errors.Is(err, consistency.ErrClusterMismatch))
	// Output:
	// MkU3OEVBNTcwNTJENDM2Qk@57
	// true
}

func ExampleParseToken() {
	// A service hands its token to another over HTTP, e.g. in a header.
	token := consistency.MustOf("cluster-a", 1234).Encode()
	fmt.Println(token)

	got, err := consistency.ParseToken(token)
	fmt.Println(got, err)
	// Output:
	// kc1.1234.Y2x1c3Rlci1h
	// cluster-a@1234 <nil>
}

func ExampleNewMemoryStore() {
	store := consistency.NewMemoryStore()
	_, _ = store.Advance(consistency.MustOf("cluster-a", 10))
	_, _ = store.Advance(consistency.MustOf("cluster-a", 7)) // older: ignored
	fmt.Println(store.Load())

	store.Reset() // a rebootstrap landed on another cluster
	fmt.Println(store.Load().IsUnknown())
	// Output:
	// cluster-a@10
	// true
}

// A HandedStore reads as the later of a shared store and a token handed in
// with one unit of work, and sends what brokers answer to the shared
// store: the handed token never raises the store of other callers.
func ExampleNewHandedStore() {
	shared := consistency.NewMemoryStore()
	_, _ = shared.Advance(consistency.MustOf("cluster-a", 10))
	s := consistency.NewHandedStore(shared, consistency.MustOf("cluster-a", 42))
	fmt.Println(s.Load(), shared.Load())
	_, _ = s.Advance(consistency.MustOf("cluster-a", 50)) // a broker's answer
	fmt.Println(s.Load(), shared.Load())
	// Output:
	// cluster-a@42 cluster-a@10
	// cluster-a@50 cluster-a@50
}
