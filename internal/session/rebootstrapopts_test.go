package session

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/kconsist/kconsist/rebootstrap"
)

// TestRebootstrapOpts: the cluster check is on (ApiVersions v5 allowed)
// only with Rebootstrap and ClusterCheck(true); None installs no
// rebootstrap hook, Rebootstrap hands back the seeds unresolved.
func TestRebootstrapOpts(t *testing.T) {
	apiVersionsMax := func(r rebootstrapOpts) int16 {
		cl, err := kgo.NewClient(append(r.opts, kgo.SeedBrokers("127.0.0.1:1"))...)
		require.NoError(t, err)
		defer cl.Close()
		v, ok := cl.OptValue(kgo.MaxVersions).(*kversion.Versions)
		if !ok || v == nil {
			return -1 // no cap set: franz-go's latest
		}
		m, _ := v.LookupMaxKeyVersion(apiVersionsKey)
		return m
	}
	require.GreaterOrEqual(t, apiVersionsMax(newRebootstrapOpts(rebootstrap.Rebootstrap, true, nil, nil)), int16(5), "check on: ApiVersions v5 allowed")
	require.Equal(t, int16(4), apiVersionsMax(newRebootstrapOpts(rebootstrap.Rebootstrap, false, nil, nil)))
	require.Equal(t, int16(4), apiVersionsMax(newRebootstrapOpts(rebootstrap.None, true, nil, nil)), "none implies no check")
	require.Nil(t, newRebootstrapOpts(rebootstrap.None, true, nil, nil).hook, "none installs no rebootstrap hook")

	var required int
	r := newRebootstrapOpts(rebootstrap.Rebootstrap, true, []string{"kafka.test:9092"}, func() { required++ })
	require.Len(t, r.opts, 1)
	seeds, err := r.hook()
	require.NoError(t, err)
	require.Equal(t, []string{"kafka.test:9092"}, seeds, "host names go back unresolved")
	require.Equal(t, 1, required)
}
