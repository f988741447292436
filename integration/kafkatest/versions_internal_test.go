package kafkatest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestVersionOption(t *testing.T) {
	var c config
	require.NoError(t, Version("3.6.2")(&c))
	require.Equal(t, "3.6.2", c.version)
	err := Version("3.5.0")(&c)
	require.ErrorContains(t, err, `Version("3.5.0")`)
	require.ErrorContains(t, err, "3.6.2, 3.9.1, 4.0.0, 4.1.0, 4.2.0, 4.4.0")
	require.Equal(t, "3.6.2", c.version, "a refused version leaves the config as it was")

	// The agent hooks into 4.4.0's classes only.
	_, _, err = prepare(context.Background(), []Opt{Version("4.0.0"), KIP1243()})
	require.ErrorContains(t, err, `KIP1243 needs Apache Kafka 4.4.0`)
	require.ErrorContains(t, err, `Version("4.0.0")`)
}

func TestMatrixVersions(t *testing.T) {
	for _, tc := range []struct {
		env  string
		want []string
		err  string
	}{
		{"", []string{"4.4.0", "3.6.2"}, ""},
		{"all", []string{"3.6.2", "3.9.1", "4.0.0", "4.1.0", "4.2.0", "4.4.0"}, ""},
		{"4.0.0", []string{"4.0.0"}, ""},
		{" 3.9.1 , 4.1.0,3.9.1,", []string{"3.9.1", "4.1.0"}, ""},
		{"4.0.0,2.8.1", nil, `"2.8.1" is not one`},
		{",", nil, "names no version"},
	} {
		t.Setenv(VersionsEnv, tc.env)
		got, err := MatrixVersions()
		if tc.err != "" {
			require.ErrorContains(t, err, tc.err, "%q", tc.env)
			require.ErrorContains(t, err, VersionsEnv)
			continue
		}
		require.NoError(t, err, "%q", tc.env)
		require.Equal(t, tc.want, got, "%q", tc.env)
	}
}

func TestProvisionVersionKafkaHome(t *testing.T) {
	home := t.TempDir()
	libs := filepath.Join(home, "libs")
	require.NoError(t, os.MkdirAll(libs, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(libs, "kafka_2.13-3.9.1.jar"), nil, 0o644))
	t.Setenv("KAFKA_HOME", home)

	cp, err := ProvisionVersion(context.Background(), "3.9.1")
	require.NoError(t, err)
	require.Equal(t, filepath.Join(libs, "*"), cp)

	// The default release is never run from another release's libs.
	_, err = Provision(context.Background())
	require.ErrorContains(t, err, "holds kafka_2.13-3.9.1.jar, not kafka_2.13-4.4.0.jar")

	// Another release comes from Maven into a cache of its own: with a
	// finished cache there and no mvn on PATH, that cache is used.
	cache := t.TempDir()
	t.Setenv("KCONSIST_KAFKA_CACHE", cache)
	t.Setenv("PATH", t.TempDir())
	own := filepath.Join(cache, "kafka-4.0.0", "libs")
	require.NoError(t, os.MkdirAll(own, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(own, ".complete"), nil, 0o644))
	cp, err = ProvisionVersion(context.Background(), "4.0.0")
	require.NoError(t, err)
	require.Equal(t, filepath.Join(own, "*"), cp)

	_, err = ProvisionVersion(context.Background(), "4.2.0")
	require.ErrorIs(t, err, ErrMissingTool)
	require.ErrorContains(t, err, "Kafka 4.2.0")

	_, err = ProvisionVersion(context.Background(), "9.9.9")
	require.ErrorContains(t, err, `"9.9.9" is not one`)
}

func TestPomNamesVersion(t *testing.T) {
	p := pomFor("3.6.2")
	require.Contains(t, p, "<artifactId>kafka_2.13</artifactId><version>3.6.2</version>")
}

// FuzzMatrixVersions: whatever KCONSIST_KAFKA_VERSIONS holds, MatrixVersions
// returns releases it runs, without duplicates, or an error naming the
// variable.
func FuzzMatrixVersions(f *testing.F) {
	for _, s := range []string{"", "all", "3.6.2,4.4.0", " 4.0.0 ,", "4.4", ",,", "all,3.6.2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, env string) {
		if strings.ContainsRune(env, 0) {
			return // not a value an environment variable can hold
		}
		t.Setenv(VersionsEnv, env)
		got, err := MatrixVersions()
		if err != nil {
			require.ErrorContains(t, err, VersionsEnv)
			return
		}
		require.NotEmpty(t, got)
		seen := map[string]bool{}
		for _, v := range got {
			require.NoError(t, checkVersion(v))
			require.False(t, seen[v], "%q twice", v)
			seen[v] = true
		}
	})
}
