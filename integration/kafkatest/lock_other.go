//go:build !unix

package kafkatest

// lockFile is a no-op here; provisioning still publishes the cache with an
// atomic rename, so the worst case is duplicate work.
func lockFile(string) (unlock func(), err error) { return func() {}, nil }
