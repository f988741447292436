package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/factory"
	"github.com/kconsist/kconsist/integration/kafkatest"
	"github.com/kconsist/kconsist/producer"
)

// misrouteConfig sizes the misroute recovery measurement.
type misrouteConfig struct {
	Trials  int // per client
	Timeout time.Duration
}

// misrouteTrial is one address move.
type misrouteTrial struct {
	Detect   time.Duration // swap → the wrong cluster answered REBOOTSTRAP_REQUIRED (0: not seen)
	Recovery time.Duration // swap → the record produced at the swap acknowledged by the right cluster
	Failed   string
}

// misrouteResult is every trial of both clients, and where the records
// ended up.
type misrouteResult struct {
	Trials       [2][]misrouteTrial
	RightRecords [2]int64 // records cluster A holds
	WrongRecords [2]int64 // records cluster B holds (must be 0)
	Produced     [2]int64 // records acknowledged
}

// movingListener makes kfake advertise an address that can change while it
// runs (kfake asks its listener for the address on every Metadata answer):
// the broker "moves" to a new address.
type movingListener struct {
	net.Listener
	adv *atomic.Pointer[net.TCPAddr]
}

func (l movingListener) Addr() net.Addr { return l.adv.Load() }

// misrouteRig is cluster A (the right one, one broker behind two
// forwarders), cluster B (the wrong one) and the two forwarders. At any time
// one forwarder leads to A and is the address A advertises; a move switches
// A to the other forwarder and hands the old address to B.
type misrouteRig struct {
	a, b         *kfake.Cluster
	realA, realB string
	fw           [2]*kafkatest.Forwarder
	cur          int
	adv          atomic.Pointer[net.TCPAddr]

	mu       sync.Mutex
	since    time.Time
	rejected time.Time // first REBOOTSTRAP_REQUIRED after since
}

func newMisrouteRig() (*misrouteRig, error) {
	r := &misrouteRig{}
	ok := false
	defer func() {
		if !ok {
			r.close()
		}
	}()
	for i := range r.fw {
		fw, err := kafkatest.NewForwarder("")
		if err != nil {
			return nil, err
		}
		r.fw[i] = fw
		fw.Observe(r.observe)
	}
	adv, err := net.ResolveTCPAddr("tcp", r.fw[0].Addr())
	if err != nil {
		return nil, err
	}
	r.adv.Store(adv)
	r.a, err = kfake.NewCluster(kfake.NumBrokers(1), kfake.ClusterID("bench-cluster-a"), kfake.SeedTopics(1, "t"),
		kfake.ListenFn(func(network, _ string) (net.Listener, error) {
			ln, err := net.Listen(network, "127.0.0.1:0")
			if err != nil {
				return nil, err
			}
			r.realA = ln.Addr().String()
			return movingListener{ln, &r.adv}, nil
		}))
	if err != nil {
		return nil, err
	}
	r.b, err = kfake.NewCluster(kfake.NumBrokers(1), kfake.ClusterID("bench-cluster-b"), kfake.SeedTopics(1, "t"))
	if err != nil {
		return nil, err
	}
	r.realB = r.b.ListenAddrs()[0]
	r.fw[0].SetTarget(r.realA)
	ok = true
	return r, nil
}

func (r *misrouteRig) observe(fr kafkatest.Frame) {
	if fr.Request || fr.Key != 18 {
		return
	}
	resp, err := fr.ApiVersionsResponse()
	if err != nil || resp.ErrorCode != kerr.RebootstrapRequired.Code {
		return
	}
	now := time.Now()
	r.mu.Lock()
	if r.rejected.IsZero() && !r.since.IsZero() {
		r.rejected = now
	}
	r.mu.Unlock()
}

// move gives A a new address and the old one to B, and returns when.
func (r *misrouteRig) move() (time.Time, error) {
	next := 1 - r.cur
	adv, err := net.ResolveTCPAddr("tcp", r.fw[next].Addr())
	if err != nil {
		return time.Time{}, err
	}
	r.fw[next].SetTarget(r.realA)
	r.adv.Store(adv)
	t0 := time.Now()
	r.mu.Lock()
	r.since, r.rejected = t0, time.Time{}
	r.mu.Unlock()
	r.fw[r.cur].SetTarget(r.realB) // closes every connection through it
	r.cur = next
	return t0, nil
}

func (r *misrouteRig) rejectedAt() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rejected
}

func (r *misrouteRig) close() {
	for _, fw := range r.fw {
		if fw != nil {
			_ = fw.Close()
		}
	}
	if r.a != nil {
		r.a.Close()
	}
	if r.b != nil {
		r.b.Close()
	}
}

func endOffset(ctx context.Context, addr string) (int64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	offs, err := kadm.NewClient(cl).ListEndOffsets(ctx, "t")
	if err != nil {
		return 0, err
	}
	o, ok := offs.Lookup("t", 0)
	if !ok {
		return 0, errors.New("no offset for t[0]")
	}
	return o.Offset, o.Err
}

// runMisroute measures, for the factory producer and plain kgo (both with
// default settings and the KIP-1242 check franz-go does), how long after an
// address move the first record reaches the right cluster. Each client has
// its own rig; trials alternate between them.
func runMisroute(ctx context.Context, cfg misrouteConfig, logf func(string, ...any)) (*misrouteResult, error) {
	var rigs [2]*misrouteRig
	var sends [2]func(ctx context.Context, v []byte, done func(error))
	for v := range 2 {
		rig, err := newMisrouteRig()
		if err != nil {
			return nil, err
		}
		defer rig.close()
		rigs[v] = rig
	}
	f, err := factory.New(nil, factory.BootstrapServers(rigs[vFactory].realA))
	if err != nil {
		return nil, err
	}
	p, err := factory.NewProducer(f, producer.Bytes(), producer.Bytes())
	if err != nil {
		return nil, err
	}
	defer p.Close(context.Background())
	sends[vFactory] = func(ctx context.Context, v []byte, done func(error)) {
		if err := p.ProduceAsync(ctx, producer.Record[[]byte, []byte]{Topic: "t", Value: v},
			func(_ producer.Result, err error) { done(err) }); err != nil {
			done(err)
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(rigs[vPlain].realA))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	sends[vPlain] = func(ctx context.Context, v []byte, done func(error)) {
		cl.Produce(ctx, &kgo.Record{Topic: "t", Value: v}, func(_ *kgo.Record, err error) { done(err) })
	}
	res := &misrouteResult{}
	produce := func(ctx context.Context, v int) error {
		ch := make(chan error, 1)
		sends[v](ctx, []byte("r"), func(err error) { ch <- err })
		err := <-ch
		if err == nil {
			res.Produced[v]++
		}
		return err
	}
	for i := range cfg.Trials {
		order := [2]int{vFactory, vPlain}
		if i%2 == 1 {
			order = [2]int{vPlain, vFactory}
		}
		for _, v := range order {
			tctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
			var tr misrouteTrial
			// Steady state first: the client knows A at its current address.
			for range 3 {
				if err := produce(tctx, v); err != nil {
					cancel()
					return nil, fmt.Errorf("misroute %s trial %d: before the move: %w", variantNames[v], i, err)
				}
			}
			t0, err := rigs[v].move()
			if err != nil {
				cancel()
				return nil, err
			}
			if err := produce(tctx, v); err != nil {
				tr.Failed = short(err)
			} else {
				tr.Recovery = time.Since(t0)
			}
			if at := rigs[v].rejectedAt(); !at.IsZero() {
				tr.Detect = at.Sub(t0)
			}
			cancel()
			res.Trials[v] = append(res.Trials[v], tr)
		}
	}
	for v := range 2 {
		if res.RightRecords[v], err = endOffset(ctx, rigs[v].realA); err != nil {
			return nil, fmt.Errorf("misroute: count A: %w", err)
		}
		if res.WrongRecords[v], err = endOffset(ctx, rigs[v].realB); err != nil {
			return nil, fmt.Errorf("misroute: count B: %w", err)
		}
		s := res.summary(v)
		logf("misroute %s: recovery p50 %.0fms p99 %.0fms max %.0fms, failures %d, A %d/%d, B %d", variantNames[v],
			s.P50, s.P99, s.Max, s.Failures, res.RightRecords[v], res.Produced[v], res.WrongRecords[v])
	}
	return res, nil
}

type misrouteSummary struct {
	N, Failures, Detected int
	P50, P99, Max         float64 // recovery, ms
	DetectP50             float64
}

func (r *misrouteResult) summary(v int) misrouteSummary {
	s := misrouteSummary{}
	var rec, det []float64
	for _, tr := range r.Trials[v] {
		s.N++
		if tr.Failed != "" {
			s.Failures++
			continue
		}
		rec = append(rec, ms(tr.Recovery))
		if tr.Detect > 0 {
			s.Detected++
			det = append(det, ms(tr.Detect))
		}
	}
	s.P50, s.P99, s.Max = quantile(rec, 0.5), quantile(rec, 0.99), quantile(rec, 1)
	s.DetectP50 = quantile(det, 0.5)
	return s
}
