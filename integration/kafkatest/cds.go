package kafkatest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// A JVM spends most of a broker's start loading classes. A class data
// sharing (CDS) archive of a broker's classes, made once per machine by a
// broker that starts and stops, cuts that CPU time by about 40%, which on a
// 2-core machine running several nodes is wall time too.
var archives struct {
	sync.Mutex
	path map[string]string // key -> archive, "" when it could not be made
}

// classArchive returns a CDS archive for brokers run by java with classpath,
// making it first if need be, or "" if none can be had; brokers then start
// without one. The archive is keyed by the JVM binary and the classpath, and
// a JVM that cannot use it (another JDK build) ignores it.
func classArchive(java, classpath, version string) string {
	archives.Lock()
	defer archives.Unlock()
	key := java + "\x00" + classpath
	if p, ok := archives.path[key]; ok {
		return p
	}
	if archives.path == nil {
		archives.path = make(map[string]string)
	}
	p := makeArchive(java, classpath, version)
	archives.path[key] = p
	return p
}

func makeArchive(java, classpath, version string) string {
	dir, err := cacheDirFor(version)
	if err != nil {
		return ""
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00", classpath, version)
	if real, err := filepath.EvalSymlinks(java); err == nil {
		if st, err := os.Stat(real); err == nil {
			fmt.Fprintf(h, "%s\x00%d\x00%d", real, st.Size(), st.ModTime().UnixNano())
		}
	}
	path := filepath.Join(dir, "cds-"+hex.EncodeToString(h.Sum(nil))[:16]+".jsa")
	if _, err := os.Stat(path); err == nil {
		return path
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return ""
	}
	unlock, err := lockFile(filepath.Join(dir, ".lock"))
	if err != nil {
		return ""
	}
	defer unlock()
	if _, err := os.Stat(path); err == nil {
		return path
	}
	tmp, err := os.MkdirTemp(dir, "cds-training-")
	if err != nil {
		return ""
	}
	defer os.RemoveAll(tmp)
	dump := filepath.Join(tmp, "kafka.jsa")
	c := &Cluster{id: NewClusterID(), version: version, java: java, classpath: classpath, timeout: 2 * time.Minute,
		dir: filepath.Join(tmp, "cluster"), trainArchive: dump}
	// The archive is written when the broker's JVM exits normally, so the
	// training broker is stopped with SIGTERM, not killed.
	err = c.boot(context.Background(), config{nodes: 1, version: version})
	if stopErr := c.Stop(1); err == nil {
		err = stopErr
	}
	c.killAll()
	if err != nil {
		return ""
	}
	if st, err := os.Stat(dump); err != nil || st.Size() == 0 {
		return ""
	}
	if err := os.Rename(dump, path); err != nil {
		return ""
	}
	return path
}
