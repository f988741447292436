package main

import (
	"bytes"
	"context"
	"time"

	"github.com/kconsist/kconsist/factory"
	"github.com/kconsist/kconsist/producer"
)

// drSection is the report section of -drswitch-only.
const drSection = "drswitch-realkafka"

// drFactory makes a factory on seed and its producer of topic, with the
// debug logger of KCONSIST_MISROUTE_TRACE when set.
func drFactory(seed, topic string) (func(func(error)), func(), error) {
	f, err := factory.New(append([]factory.Opt{factory.BootstrapServers(seed)}, misrouteTraceOpts()...)...)
	if err != nil {
		return nil, nil, err
	}
	p, err := factory.NewProducer(f, producer.Bytes(), producer.Bytes())
	if err != nil {
		f.Close(context.Background())
		return nil, nil, err
	}
	value := []byte("r")
	send := func(done func(error)) {
		if err := p.ProduceAsync(context.Background(), producer.Record[[]byte, []byte]{Topic: topic, Value: value},
			func(_ producer.Result, err error) { done(err) }); err != nil {
			done(err)
		}
	}
	closeFn := func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = p.Close(cctx)
		f.Close(context.Background())
	}
	return send, closeFn, nil
}

// runDRSwitchStep is the step of -drswitch-only: the DR address switch on
// two real Kafka 4.4 clusters, with the Java producer.
func runDRSwitchStep(ctx context.Context, o options, p plan, m machine) (string, error) {
	t0 := time.Now()
	res, err := runDRSwitch(ctx, p.drswitch, o.Logf, drFactory)
	if err != nil {
		return "", err
	}
	var body bytes.Buffer
	header(&body, o, m, time.Since(t0))
	drMarkdown(&body, res, p.drswitch)
	return body.String(), nil
}
