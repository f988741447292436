package producer

import "sync"

// refusals delivers the outcomes of records refused unsent: produced after
// their producer's Close, while a pinned producer's cluster is gone, while
// the cluster refuses the client, or after a cluster change cut their
// transaction short. Their callbacks run on a goroutine of the producer's,
// never on the caller's (which may hold a lock its callback takes), in the
// order they were refused.
//
// They are kept apart from the outcomes of records a client gave back
// (outcome.go): a refused record has no partition, so there is no order
// among those to keep, and a stream of refusals (goroutines that keep
// producing to a closed producer) never holds up an acknowledgement
// behind it, nor keeps the engine's own work from ending (see
// work, outcome.go): a Flush or Close waits only for the refusals of
// records produced before it, through their epoch.
type refusals struct {
	mu sync.Mutex
	q  []refusal // waiting for the goroutine that delivers them
	// running: a goroutine delivers q; joined: Close joined it, and a
	// record refused since gets its callback from its caller (after
	// Close returned, as a closed franz-go client fails a record).
	running, joined bool
	wg              sync.WaitGroup
}

type refusal struct {
	x   *inflight
	err error
}

// refuse fails r, which was not sent, with err.
func (e *engine) refuse(r ref, err error) {
	if r.x.takeResent() {
		// The engine sent it again and counted that as its own work:
		// that ended.
		defer e.work.end()
	}
	e.refusals.add(r.x, err)
}

// add queues x's failure with err, starting the goroutine that delivers
// the queue if none runs.
func (rs *refusals) add(x *inflight, err error) {
	rs.mu.Lock()
	if rs.joined {
		rs.mu.Unlock()
		deliver(x, err)
		return
	}
	rs.q = append(rs.q, refusal{x, err})
	if !rs.running {
		rs.running = true
		rs.wg.Add(1)
		go rs.run()
	}
	rs.mu.Unlock()
}

// run delivers the queue, taking all of it at once, until it is empty.
func (rs *refusals) run() {
	defer rs.wg.Done()
	for {
		rs.mu.Lock()
		q := rs.q
		rs.q = nil
		if len(q) == 0 {
			rs.running = false
			rs.mu.Unlock()
			return
		}
		rs.mu.Unlock()
		for _, f := range q {
			deliver(f.x, f.err)
		}
	}
}

// join waits until every refusal queued has been delivered; refusals after
// it are delivered by their caller (Close).
func (rs *refusals) join() {
	rs.mu.Lock()
	rs.joined = true
	rs.mu.Unlock()
	rs.wg.Wait()
}
