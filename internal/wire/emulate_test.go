package wire

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kconsist/kconsist/consistency"
)

// scriptedOracle answers from fields a test sets; each broker catches up
// by step per question, as a lagging broker applies the log. A question
// to a hung broker, or a hung DescribeQuorum, is answered only when its
// context ends.
type scriptedOracle struct {
	mu         sync.Mutex
	applied    map[string]int64
	step       int64
	committed  consistency.Token
	err        error
	hung       map[string]bool // brokers whose ApiVersions never answer
	hungQuorum bool            // DescribeQuorum never answers
	failQuorum int             // the next DescribeQuorums that fail
	cluster    string          // the cluster Applied answers for; "" means "c"
	asked      atomic.Int64    // Applied questions
	quorum     atomic.Int64    // Committed questions
}

func (o *scriptedOracle) Committed(ctx context.Context) (consistency.Token, error) {
	o.quorum.Add(1)
	o.mu.Lock()
	hung := o.hungQuorum
	o.mu.Unlock()
	if hung {
		<-ctx.Done()
		return consistency.Token{}, ctx.Err()
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.failQuorum > 0 {
		o.failQuorum--
		return consistency.Token{}, errors.New("DescribeQuorum: dial tcp 127.0.0.1:1: connect: connection refused")
	}
	return o.committed, o.err
}

func (o *scriptedOracle) Applied(ctx context.Context, addr string, node int32) (string, int64, error) {
	o.asked.Add(1)
	o.mu.Lock()
	hung := o.hung[addr]
	o.mu.Unlock()
	if hung {
		<-ctx.Done()
		return "", -1, ctx.Err()
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	a := o.applied[addr]
	if a >= 0 {
		o.applied[addr] = a + o.step
	}
	cluster := o.cluster
	if cluster == "" {
		cluster = "c"
	}
	return cluster, a, nil
}

func (o *scriptedOracle) set(fn func(o *scriptedOracle)) {
	o.mu.Lock()
	defer o.mu.Unlock()
	fn(o)
}

// newTestEmulator returns an Emulator on o that has verified the cluster
// (o.committed must be a token of cluster "c", or Unknown), closed with
// the test.
func newTestEmulator(t *testing.T, o *scriptedOracle, mod func(*EmulationConfig)) (*Emulator, *consistency.MemoryStore, *[]error) {
	t.Helper()
	store := consistency.NewMemoryStore()
	var offs []error
	cfg := EmulationConfig{Store: store, Oracle: o, OnOff: func(err error) { offs = append(offs, err) }}
	if mod != nil {
		mod(&cfg)
	}
	e, err := NewEmulator(cfg)
	require.NoError(t, err)
	t.Cleanup(e.Close)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	e.learnCommitted(ctx)
	require.True(t, e.verified.Load() || o.err != nil)
	return e, store, &offs
}

func noStop() error { return nil }

// advance moves store to cluster@offset and returns that token.
func advance(t *testing.T, store consistency.Store, cluster string, offset int64) consistency.Token {
	t.Helper()
	tok := consistency.MustOf(cluster, offset)
	_, err := store.Advance(tok)
	require.NoError(t, err)
	return tok
}

func maxWait(d time.Duration) func(*EmulationConfig) {
	return func(c *EmulationConfig) { c.MaxWait = d }
}

// TestEmulatorWaitsForLaggingBroker: a request to a broker behind the
// token is written once the broker caught up, which it shows to the
// questions asked with a pause doubling from 1ms: 10, 15, 20, 25, 30
// after 0, 1, 3, 7 and 15ms.
func TestEmulatorWaitsForLaggingBroker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := &scriptedOracle{applied: map[string]int64{"b1": 10}, step: 5}
		e, store, _ := newTestEmulator(t, o, maxWait(5*time.Second))
		v := e.view("b1")
		v.saw(10)
		cur := advance(t, store, "c", 30)
		waited, err := e.beforeWrite(v, apiVersionsKey, cur, time.Time{}, noStop)
		require.False(t, waited, "the handshake never waits")
		require.NoError(t, err)
		start := time.Now()
		waited, err = e.beforeWrite(v, metadataKey, cur, time.Time{}, noStop)
		require.True(t, waited)
		require.NoError(t, err)
		require.Equal(t, 15*time.Millisecond, time.Since(start))
		require.EqualValues(t, 30, v.applied.Load())
		require.EqualValues(t, 5, o.asked.Load())
		waited, err = e.beforeWrite(v, metadataKey, cur, time.Time{}, noStop)
		require.False(t, waited, "a broker known to be caught up costs nothing")
		require.NoError(t, err)
		require.EqualValues(t, 1, e.Stats().Waits)
	})
}

// TestEmulatorBrokerNeverCatchesUp: a request waits MaxWait, then fails
// with an *InconsistentMetadataError, except Produce and Fetch, which go
// out; kgo's write deadline, less writeMargin, ends a wait first, and so
// does a dead connection.
func TestEmulatorBrokerNeverCatchesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := &scriptedOracle{applied: map[string]int64{"b1": 10}}
		e, store, _ := newTestEmulator(t, o, maxWait(150*time.Millisecond))
		v := e.view("b1")
		cur := advance(t, store, "c", 30)
		start := time.Now()
		_, err := e.beforeWrite(v, metadataKey, cur, time.Time{}, noStop)
		require.Equal(t, 150*time.Millisecond, time.Since(start))
		require.ErrorIs(t, err, consistency.ErrInconsistentMetadata)
		var ime *InconsistentMetadataError
		require.ErrorAs(t, err, &ime)
		require.EqualValues(t, 30, ime.Sent)
		require.EqualValues(t, 10, ime.BrokerAt)

		start = time.Now()
		_, err = e.beforeWrite(v, produceKey, cur, time.Time{}, noStop)
		require.NoError(t, err, "produce goes out after the bound: the broker answers it with a retriable error")
		require.Equal(t, 150*time.Millisecond, time.Since(start))

		long, longStore, _ := newTestEmulator(t, o, maxWait(5*time.Second))
		lv := long.view("b1")
		advance(t, longStore, "c", 30)
		start = time.Now()
		_, err = long.beforeWrite(lv, metadataKey, cur, start.Add(300*time.Millisecond), noStop)
		require.Error(t, err)
		require.Equal(t, 200*time.Millisecond, time.Since(start), "kgo's write deadline less writeMargin ends the wait")
		start = time.Now()
		_, err = long.beforeWrite(lv, produceKey, cur, time.Time{}, noStop)
		require.NoError(t, err)
		require.Equal(t, dataMaxWait, time.Since(start), "a produce waits at most the data bound")

		closed := errors.New("closed")
		_, err = e.beforeWrite(v, metadataKey, cur, time.Time{}, func() error { return closed })
		require.ErrorIs(t, err, closed)
	})
}

// TestEmulatorHungQuestions: a broker whose ApiVersions never answers and
// a DescribeQuorum that never answers hold a request no longer than its
// own bound and an answer no longer than LearnMaxWait or its read
// deadline, while the questions go on (one at a time) until AskTimeout;
// other brokers' answers are not held by them.
func TestEmulatorHungQuestions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := &scriptedOracle{applied: map[string]int64{"ok": 50}, hung: map[string]bool{"hung": true}, committed: consistency.MustOf("c", 50)}
		e, store, _ := newTestEmulator(t, o, nil)
		require.Equal(t, consistency.MustOf("c", 50), store.Load())
		hung, ok := e.view("hung"), e.view("ok")
		o.set(func(o *scriptedOracle) { o.hungQuorum = true })

		cur := store.Load()
		start := time.Now()
		_, err := e.beforeWrite(hung, produceKey, cur, start.Add(500*time.Millisecond), noStop)
		require.NoError(t, err)
		require.Equal(t, 400*time.Millisecond, time.Since(start), "a produce with a 500ms write deadline waits 400ms")
		start = time.Now()
		_, err = e.beforeWrite(hung, metadataKey, cur, time.Time{}, noStop)
		require.ErrorIs(t, err, consistency.ErrInconsistentMetadata)
		require.Equal(t, stallAfter, time.Since(start), "a broker that shows no progress, answers included, is given up after stallAfter")
		require.EqualValues(t, 1, o.asked.Load(), "one hung question at a time: the read joined the produce's")

		// A metadata write's answer: the committed offset is asked and
		// never comes; the answer goes to kgo after LearnMaxWait, or at
		// its read deadline, and the write is owed.
		created := &answer{key: int16(kmsg.CreateTopics), flexible: true, resp: kmsg.NewPtrCreateTopicsResponse()}
		start = time.Now()
		e.afterRead(ok, created)
		require.Equal(t, time.Second, time.Since(start))
		created.deadline = time.Now().Add(300 * time.Millisecond)
		start = time.Now()
		e.afterRead(ok, created)
		require.Equal(t, 300*time.Millisecond, time.Since(start))
		require.EqualValues(t, 2, e.Stats().Unlearnt)

		// Another client's metadata read on a sound broker: not held.
		o.set(func(o *scriptedOracle) { o.applied["ok"] = 60 })
		start = time.Now()
		e.afterRead(ok, &answer{key: metadataKey, flexible: true, resp: kmsg.NewPtrMetadataResponse()})
		require.Zero(t, time.Since(start))
		require.Equal(t, consistency.MustOf("c", 60), store.Load())
		require.LessOrEqual(t, o.quorum.Load(), int64(4), "DescribeQuorum is asked one at a time")
	})
}

// TestEmulatorWriteThroughFailedQuestions: DescribeQuorums that fail (a
// crashed broker, a quorum electing a leader) are asked again; the
// answer to a metadata write reaches kgo only once the committed offset
// read after it is in the store. On the code before, one failed
// DescribeQuorum let the answer go with the store below the write.
func TestEmulatorWriteThroughFailedQuestions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := &scriptedOracle{applied: map[string]int64{"ok": 50}, committed: consistency.MustOf("c", 50)}
		unlearnt := 0
		e, store, _ := newTestEmulator(t, o, func(c *EmulationConfig) { c.OnWriteUnlearnt = func() { unlearnt++ } })
		o.set(func(o *scriptedOracle) { o.failQuorum, o.committed = 3, consistency.MustOf("c", 60) })
		created := &answer{key: int16(kmsg.CreateTopics), flexible: true, resp: kmsg.NewPtrCreateTopicsResponse(),
			deadline: time.Now().Add(5 * time.Second)}
		start := time.Now()
		e.afterRead(e.view("ok"), created)
		require.Equal(t, committedRetryMin+2*committedRetryMin+4*committedRetryMin, time.Since(start), "three failures, three growing pauses")
		require.Equal(t, consistency.MustOf("c", 60), store.Load(), "the write's offset is in the store before its answer goes on")
		require.Zero(t, unlearnt)
		require.Zero(t, e.Stats().Unlearnt)
	})
}

// TestEmulatorOwedWrite: a metadata write whose read deadline ends before
// its offset is learnt is owed: OnWriteUnlearnt is told once, and every
// later request but the handshake waits until a committed offset read
// after the write is in the store, then for its broker to apply it; while
// it stays owed, a read fails (retriably) at its bound and a produce goes
// out after the data bound.
func TestEmulatorOwedWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := &scriptedOracle{applied: map[string]int64{"ok": 50}, committed: consistency.MustOf("c", 50)}
		unlearnt := 0
		logs := &warnings{}
		e, store, _ := newTestEmulator(t, o, func(c *EmulationConfig) {
			c.OnWriteUnlearnt = func() { unlearnt++ }
			c.Logger = logs
		})
		ok := e.view("ok")
		o.set(func(o *scriptedOracle) { o.hungQuorum = true })
		created := &answer{key: int16(kmsg.CreateTopics), flexible: true, resp: kmsg.NewPtrCreateTopicsResponse(),
			deadline: time.Now().Add(300 * time.Millisecond)}
		e.afterRead(ok, created)
		require.Equal(t, 1, unlearnt)
		require.EqualValues(t, 1, e.Stats().Unlearnt)
		require.Equal(t, 1, logs.count("before its offset was learnt"))

		// The handshake is never held.
		start := time.Now()
		_, err := e.beforeWrite(ok, apiVersionsKey, store.Load(), time.Time{}, noStop)
		require.NoError(t, err)
		require.Zero(t, time.Since(start))

		// The quorum answers again 2s later (the hung question ends at
		// AskTimeout, 5s after it began) with the write at 70; a read
		// waits for it, then for its broker to apply 70.
		go func() {
			time.Sleep(2 * time.Second)
			o.set(func(o *scriptedOracle) {
				o.hungQuorum, o.committed, o.applied["ok"] = false, consistency.MustOf("c", 70), 70
			})
		}()
		start = time.Now()
		waited, err := e.beforeWrite(ok, metadataKey, store.Load(), time.Time{}, noStop)
		require.NoError(t, err)
		require.True(t, waited)
		require.Equal(t, consistency.MustOf("c", 70), store.Load())
		require.GreaterOrEqual(t, ok.applied.Load(), int64(70), "the broker was waited for with the new token")
		require.Less(t, time.Since(start), e.cfg.MaxWait)
		require.Zero(t, e.owed.Load())

		// Owed again, and the quorum stays silent: a read fails at its
		// bound, a produce goes out after the data bound.
		o.set(func(o *scriptedOracle) { o.hungQuorum = true })
		created.deadline = time.Now().Add(100 * time.Millisecond)
		e.afterRead(ok, created)
		require.Equal(t, 2, unlearnt)
		start = time.Now()
		_, err = e.beforeWrite(ok, metadataKey, store.Load(), time.Time{}, noStop)
		require.ErrorIs(t, err, consistency.ErrInconsistentMetadata)
		require.Equal(t, e.cfg.MaxWait, time.Since(start))
		start = time.Now()
		_, err = e.beforeWrite(ok, produceKey, store.Load(), time.Time{}, noStop)
		require.NoError(t, err)
		require.Equal(t, dataMaxWait, time.Since(start))
	})
}

// TestEmulatorHeals: a store beyond the committed offset, which no broker
// will reach, is lowered by the Healer once a request waited healAfter,
// and the request goes out once its broker has what the store now holds.
func TestEmulatorHeals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := &scriptedOracle{applied: map[string]int64{"b1": 40}, committed: consistency.MustOf("c", 40)}
		var healed *heals
		logs := &warnings{}
		e, store, _ := newTestEmulator(t, o, func(c *EmulationConfig) {
			c.MaxWait = 5 * time.Second
			c.Logger = logs
			c.Tokens, healed = healLog(c.Store)
		})
		forged := consistency.MustOf("c", 100)
		_, err := store.Advance(forged)
		require.NoError(t, err)
		start := time.Now()
		_, err = e.beforeWrite(e.view("b1"), metadataKey, forged, time.Time{}, noStop)
		require.NoError(t, err)
		// Pauses 1, 2, 4 ... 50ms: past healAfter at 263ms, the check
		// runs during the next pause.
		require.Equal(t, 313*time.Millisecond, time.Since(start))
		synctest.Wait() // the Healer's goroutine has returned
		require.Equal(t, [][2]consistency.Token{{forged, consistency.MustOf("c", 40)}}, healed.get())
		require.Equal(t, consistency.MustOf("c", 40), store.Load())
		require.Empty(t, logs.msgs, "the store's owner reports a heal: the wire layer warns nothing of its own")
	})
}

// warnings is a kgo.Logger that keeps warnings and errors.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (*warnings) Level() kgo.LogLevel { return kgo.LogLevelWarn }

// count returns how many warnings contain text.
func (w *warnings) count(text string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, m := range w.msgs {
		if strings.Contains(m, text) {
			n++
		}
	}
	return n
}

func (w *warnings) Log(level kgo.LogLevel, msg string, _ ...any) {
	if level <= kgo.LogLevelWarn {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.msgs = append(w.msgs, msg)
	}
}

// TestEmulatorUnverified: until the cluster answered one DescribeQuorum,
// a request to a broker behind the token waits only for that question,
// within its own bound; the question is asked at most once per
// verifyEvery; a broker past the token, and a read's answer, are not held.
func TestEmulatorUnverified(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := &scriptedOracle{applied: map[string]int64{"behind": 1}, hungQuorum: true}
		store := knownStore(t, "c", 30)
		e, err := NewEmulator(EmulationConfig{Store: store, Oracle: o, AskTimeout: 300 * time.Millisecond})
		require.NoError(t, err)
		defer e.Close()
		behind, ahead := e.view("behind"), e.view("ahead")
		ahead.saw(30)

		start := time.Now()
		waited, err := e.beforeWrite(ahead, metadataKey, store.Load(), time.Time{}, noStop)
		require.False(t, waited)
		require.NoError(t, err)
		require.Zero(t, o.quorum.Load(), "a broker past the token needs no question")

		_, err = e.beforeWrite(behind, metadataKey, store.Load(), start.Add(time.Second), noStop)
		require.NoError(t, err, "unverified: the request goes out")
		require.Equal(t, 300*time.Millisecond, time.Since(start), "held until DescribeQuorum gave up (AskTimeout)")
		_, err = e.beforeWrite(behind, produceKey, store.Load(), time.Now().Add(200*time.Millisecond), noStop)
		require.NoError(t, err)
		require.Equal(t, 300*time.Millisecond, time.Since(start), "not asked again within verifyEvery: not held")
		e.afterRead(behind, &answer{key: metadataKey, flexible: true, resp: kmsg.NewPtrMetadataResponse()})
		require.Equal(t, 300*time.Millisecond, time.Since(start), "a read's answer is not held for the question")
		require.EqualValues(t, 1, o.quorum.Load())
		require.Zero(t, o.asked.Load())

		time.Sleep(verifyEvery)
		start = time.Now()
		_, err = e.beforeWrite(behind, produceKey, store.Load(), start.Add(200*time.Millisecond), noStop)
		require.NoError(t, err)
		require.Equal(t, 100*time.Millisecond, time.Since(start), "the write deadline less the margin bounds the wait")
		require.EqualValues(t, 2, o.quorum.Load())
	})
}

func TestEmulatorTurnsOffWithoutFinalizedEpoch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := &scriptedOracle{applied: map[string]int64{"b1": -1}}
		e, store, offs := newTestEmulator(t, o, nil)
		v := e.view("b1")
		_, err := e.beforeWrite(v, metadataKey, advance(t, store, "c", 30), time.Time{}, noStop)
		require.NoError(t, err, "off: requests go out as plain franz-go's")
		require.True(t, e.Off())
		require.Len(t, *offs, 1)
		require.ErrorIs(t, (*offs)[0], ErrEmulationUnsupported)
		waited, _ := e.beforeWrite(v, metadataKey, consistency.MustOf("c", 99), time.Time{}, noStop)
		require.False(t, waited)
	})
}

func TestEmulatorLearnsCommittedOffset(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := &scriptedOracle{}
		e, store, offs := newTestEmulator(t, o, nil)
		o.set(func(o *scriptedOracle) { o.committed = consistency.MustOf("c", 41) })
		created := &answer{key: int16(kmsg.CreateTopics), flexible: true, resp: kmsg.NewPtrCreateTopicsResponse()}
		e.afterRead(e.view("b1"), created)
		require.Equal(t, consistency.MustOf("c", 41), store.Load())

		o.set(func(o *scriptedOracle) { o.err = kerr.ClusterAuthorizationFailed })
		e.afterRead(e.view("b1"), created)
		require.True(t, e.Off(), "DescribeQuorum refused by ACLs turns the emulation off")
		require.Len(t, *offs, 1)
		require.ErrorIs(t, (*offs)[0], kerr.ClusterAuthorizationFailed)
		require.ErrorIs(t, (*offs)[0], ErrEmulationUnsupported)
		require.ErrorContains(t, (*offs)[0], "the principal lacks DESCRIBE on CLUSTER")
		require.ErrorContains(t, (*offs)[0], "--operation Describe --cluster")
		e.learnCommitted(t.Context())
		require.Len(t, *offs, 1, "one event, not one per write")
	})
}

// TestEmulatorMonotonicReads: after a broker answered a read, the store
// holds what that broker had applied after answering, so a read sent to a
// broker behind it waits.
func TestEmulatorMonotonicReads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := &scriptedOracle{applied: map[string]int64{"ahead": 50, "behind": 20}}
		e, store, _ := newTestEmulator(t, o, maxWait(100*time.Millisecond))
		ahead, behind := e.view("ahead"), e.view("behind")
		meta := kmsg.NewPtrMetadataResponse()
		meta.ClusterID = kmsg.StringPtr("c")
		e.afterRead(ahead, &answer{key: metadataKey, flexible: true, resp: meta})
		require.Equal(t, consistency.MustOf("c", 50), store.Load())
		_, err := e.beforeWrite(behind, metadataKey, store.Load(), time.Time{}, noStop)
		require.ErrorIs(t, err, consistency.ErrInconsistentMetadata)
		o.set(func(o *scriptedOracle) { o.applied["behind"] = 50 })
		_, err = e.beforeWrite(behind, metadataKey, store.Load(), time.Time{}, noStop)
		require.NoError(t, err)
	})
}

// TestEmulatorHoldsOnlyWhereBrokersSendNoTokens: a broker whose headers
// carry tokens holds requests itself; one not heard from yet is taken to be
// like those heard from.
func TestEmulatorHoldsOnlyWhereBrokersSendNoTokens(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, _, _ := newTestEmulator(t, &scriptedOracle{}, nil)
		a, b, c := e.view("a"), e.view("b"), e.view("c")
		require.True(t, e.active(a), "nothing heard yet: Kafka 4.4 is what users run")
		e.afterRead(a, &answer{key: metadataKey, flexible: true})
		require.True(t, e.active(a))
		e.afterRead(b, &answer{key: metadataKey, flexible: true, token: true})
		require.False(t, e.active(b), "a KIP-1243 broker waits by itself")
		require.False(t, e.active(c), "an unheard broker of a KIP-1243 cluster")
		require.True(t, e.active(a), "a broker seen without tokens stays emulated")
		require.False(t, e.holds(b, metadataKey, false), "held only where emulated")
		require.True(t, e.holds(a, metadataKey, false))
		require.False(t, e.holds(a, metadataKey, true), "an answer with a token of its own")
		require.False(t, e.holds(a, produceKey, false), "a produce answer teaches nothing")
	})
}

// TestClusterCheckOffSaidOnce: with the cluster check on, the first broker
// that accepts an ApiVersions older than v5 (Kafka before 4.4) is reported
// once, logged and told to OnClusterCheckOff; v5 answers, refused
// handshakes (UNSUPPORTED_VERSION before kgo retries lower) and a factory
// with the check off say nothing.
func TestClusterCheckOffSaidOnce(t *testing.T) {
	body := func(version, code int16) []byte {
		r := kmsg.NewPtrApiVersionsResponse()
		r.SetVersion(version)
		r.ErrorCode = code
		r.FinalizedFeaturesEpoch = 7
		return r.AppendTo(nil)
	}
	o := &scriptedOracle{applied: map[string]int64{}, committed: consistency.MustOf("c", 5)}
	for _, check := range []bool{true, false} {
		var offs []error
		logs := &warnings{}
		e, _, _ := newTestEmulator(t, o, func(c *EmulationConfig) {
			c.ClusterCheck, c.Logger = check, logs
			c.OnClusterCheckOff = func(err error) { offs = append(offs, err) }
		})
		v := e.view("b1:9092")
		e.afterRead(v, &answer{key: apiVersionsKey, version: 5, apiVersions: body(5, 0)})
		e.afterRead(v, &answer{key: apiVersionsKey, version: 5, apiVersions: body(0, int16(kerr.UnsupportedVersion.Code))})
		require.Empty(t, offs)
		for range 3 {
			e.afterRead(v, &answer{key: apiVersionsKey, version: 4, apiVersions: body(4, 0)})
			e.afterRead(e.view("b2:9092"), &answer{key: apiVersionsKey, version: 3, apiVersions: body(3, 0)})
		}
		require.EqualValues(t, 7, v.applied.Load(), "the answer is still read for its epoch")
		if !check {
			require.Empty(t, offs)
			require.Zero(t, logs.count("KIP-1242"))
			continue
		}
		require.Len(t, offs, 1)
		require.ErrorIs(t, offs[0], ErrClusterCheckUnsupported)
		require.ErrorContains(t, offs[0], "broker b1:9092 answers ApiVersions up to v4; KIP-1242 needs v5")
		require.Equal(t, 1, logs.count("KIP-1242 cluster check is off"))
	}
}

// TestEmulatorCloseWhileLearningWarnsNothing: a committed question that
// keeps failing (a broker down) and is ended by Close warns nothing: the
// warning that a write may not be visible at once is for a question that
// ran out of time, not for a factory that is closing.
func TestEmulatorCloseWhileLearningWarnsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := &scriptedOracle{failQuorum: 1 << 30}
		logs := &warnings{}
		e, err := NewEmulator(EmulationConfig{Store: consistency.NewMemoryStore(), Oracle: o, Logger: logs})
		require.NoError(t, err)
		f := e.ask.ask(&e.committed, true)
		time.Sleep(100 * time.Millisecond) // a few failed questions, each asked again
		synctest.Wait()
		require.Greater(t, o.quorum.Load(), int64(1))
		e.Close()
		<-f.done
		require.False(t, f.ok)
		require.Empty(t, logs.msgs, "a warning for a question Close ended")
	})
}
