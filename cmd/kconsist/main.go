// Command kconsist makes "create, then use" safe for any Kafka client:
// it changes topics and configs and waits until every broker of the
// cluster has applied the change, so that the next process, in whatever
// language, finds what was created on whichever broker it asks. It also
// prints and waits for consistency tokens, and produces and consumes
// records that carry one.
//
// Install it from a checkout of the repository with
//
//	go install ./cmd/kconsist
//
// From the first release on (the command's module tagged
// cmd/kconsist/vX.Y.Z, requiring the SDK's vX.Y.Z), also with
//
//	go install github.com/kconsist/kconsist/cmd/kconsist@vX.Y.Z
//
// See README.md next to this file, or kconsist --help.
//
// Exit status:
//
//	0  success
//	1  the operation failed (the cluster refused it: topic exists, ...)
//	2  bad usage: flags, arguments, configuration
//	3  timeout: --timeout ran out (a wait names the brokers behind the
//	   token, and the brokers missing a topic's partitions or leaders)
//	4  the cluster could not be reached
//	5  wrong cluster: the token names another cluster
//	6  bad token: malformed, or beyond the cluster's committed offset
//	7  authentication failed (SASL or TLS)
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	// A closed stdout (| head) makes a write fail with EPIPE instead of
	// killing the process, so that consume commits what was written.
	signal.Ignore(syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := runContext(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
