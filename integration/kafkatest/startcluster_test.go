package kafkatest_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kconsist/kconsist/integration/kafkatest"
)

// TestStartClusterMissingJava: a program gets an error that says what to
// install, not a panic or a hang, when java is not on PATH.
func TestStartClusterMissingJava(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := kafkatest.StartCluster(ctx)
	require.Nil(t, c)
	require.True(t, errors.Is(err, kafkatest.ErrMissingTool), "%v", err)
	require.ErrorContains(t, err, "java is not on PATH")
}

// TestStartClusterBadOption: options are checked before anything starts.
func TestStartClusterBadOption(t *testing.T) {
	_, err := kafkatest.StartCluster(context.Background(), kafkatest.Nodes(0))
	require.ErrorContains(t, err, "kafkatest.StartCluster: Nodes(0)")
}

// TestStartClusterClose: a program's cluster answers and Close ends it,
// removing its directory.
func TestStartClusterClose(t *testing.T) {
	if testing.Short() {
		t.Skip("kafkatest: real Apache Kafka tests are skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := kafkatest.StartCluster(ctx)
	require.NoError(t, err)
	defer c.Close()
	require.True(t, c.Running(1))
	logPath, err := c.LogPath(1)
	require.NoError(t, err)
	require.FileExists(t, logPath)

	require.NoError(t, c.Close())
	require.False(t, c.Running(1), "Close ended the node")
	_, err = os.Stat(logPath)
	require.True(t, os.IsNotExist(err), "Close removed the cluster's directory: %v", err)
	require.NoError(t, c.Close(), "Close is idempotent")
}
