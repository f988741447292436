package factory

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/kconsist/kconsist/consumer"
	"github.com/kconsist/kconsist/producer"
)

// TestMain fails the package's tests if any goroutine outlives them.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestClosedFactoryMakesNoClient: after Close, every constructor fails
// with ErrClosed, and Close has joined the factory's cluster watcher.
func TestClosedFactoryMakesNoClient(t *testing.T) {
	before := goleak.IgnoreCurrent() // goroutines of earlier tests still ending
	kc := newKfake(t)
	f, err := New(BootstrapServers(kc.ListenAddrs()...))
	require.NoError(t, err)
	adm, err := f.Admin() // starts the cluster watcher
	require.NoError(t, err)
	defer adm.Close(context.Background())
	require.NoError(t, f.Close(context.Background()))
	require.NoError(t, f.Close(context.Background()), "a second Close waits as the first and reports the same")

	_, err = f.Admin()
	require.ErrorIs(t, err, ErrClosed)
	_, err = NewProducer(f, producer.String(), producer.String())
	require.ErrorIs(t, err, ErrClosed)
	_, err = NewConsumer(f, consumer.String(), consumer.String(), ConsumeTopics("t"))
	require.ErrorIs(t, err, ErrClosed)
	_, err = f.KgoClient()
	require.ErrorIs(t, err, ErrClosed)
	adm.Close(context.Background())
	kc.Close()
	goleak.VerifyNone(t, before)
}
