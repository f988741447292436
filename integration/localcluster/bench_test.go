package localcluster

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkProduceRoundTrip measures one acks=all produce round trip of one
// small record, straight to kfake and through a gateway, in the same run.
func BenchmarkProduceRoundTrip(b *testing.B) {
	c := newCluster(b, Brokers(1), SeedTopics(1, "bench"))
	for _, tc := range []struct {
		name  string
		addrs []string
	}{
		{"kfake", c.KfakeAddrs()},
		{"gateway", c.Addrs()},
	} {
		b.Run(tc.name, func(b *testing.B) {
			cl := newClient(b, tc.addrs, kgo.DefaultProduceTopic("bench"), kgo.ProducerLinger(0))
			ctx := context.Background()
			if err := cl.ProduceSync(ctx, kgo.StringRecord("warm")).FirstErr(); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if err := cl.ProduceSync(ctx, kgo.StringRecord("v")).FirstErr(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkGatewayOverhead interleaves produce round trips straight to
// kfake and through a gateway, so both see the same machine load, and
// reports the ratio of their mean times (target: at most 1.2).
func BenchmarkGatewayOverhead(b *testing.B) {
	c := newCluster(b, Brokers(1), SeedTopics(1, "bench"))
	ctx := context.Background()
	direct := newClient(b, c.KfakeAddrs(), kgo.DefaultProduceTopic("bench"), kgo.ProducerLinger(0))
	gated := newClient(b, c.Addrs(), kgo.DefaultProduceTopic("bench"), kgo.ProducerLinger(0))
	for _, cl := range []*kgo.Client{direct, gated} {
		if err := cl.ProduceSync(ctx, kgo.StringRecord("warm")).FirstErr(); err != nil {
			b.Fatal(err)
		}
	}
	var tDirect, tGated time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		if err := direct.ProduceSync(ctx, kgo.StringRecord("v")).FirstErr(); err != nil {
			b.Fatal(err)
		}
		mid := time.Now()
		if err := gated.ProduceSync(ctx, kgo.StringRecord("v")).FirstErr(); err != nil {
			b.Fatal(err)
		}
		tDirect += mid.Sub(start)
		tGated += time.Since(mid)
	}
	b.ReportMetric(float64(tDirect.Nanoseconds())/float64(b.N), "ns-kfake/op")
	b.ReportMetric(float64(tGated.Nanoseconds())/float64(b.N), "ns-gateway/op")
	b.ReportMetric(float64(tGated)/float64(tDirect), "ratio")
}

// BenchmarkParseRequestHeader measures the gateway's per-request header
// parse, stamped with a ConsistencyState.
func BenchmarkParseRequestHeader(b *testing.B) {
	r := &rawClient{t: b}
	var frame []byte
	r.conn = &captureConn{out: &frame}
	r.send(metadataReq("bench"), &headerState{clusterID: strPtr("bench-cluster"), token: 42})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := parseRequestHeader(frame); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendResponseFrame measures stamping a response header.
func BenchmarkAppendResponseFrame(b *testing.B) {
	body := make([]byte, 512)
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		buf = appendResponseFrame(buf[:0], 7, true, nil, "MkU3OEVBNTcwNTJENDM2Qg", 12345, body)
	}
}

func strPtr(s string) *string { return &s }
