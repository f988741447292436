package localcluster

import (
	"context"
	"sync"
	"time"
)

// broker is the metadata side of one broker: the image it serves and the
// offset it has applied. Its applier follows the log, applying each batch
// once the batch is lag old, unless paused.
type broker struct {
	c    *Cluster
	node int32

	mu        sync.Mutex
	paused    bool
	lag       time.Duration
	applied   int64
	appliedCh chan struct{} // closed and replaced whenever applied moves
	wake      chan struct{} // capacity 1: lag or pause changed

	imgMu sync.RWMutex
	img   *image
}

func newBroker(c *Cluster, node int32, lag time.Duration) *broker {
	return &broker{
		c:         c,
		node:      node,
		lag:       lag,
		applied:   -1,
		appliedCh: make(chan struct{}),
		wake:      make(chan struct{}, 1),
		img:       newImage(),
	}
}

func (b *broker) poke() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

func (b *broker) appliedOffset() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.applied
}

// view runs fn on the broker's image; fn must not keep it.
func (b *broker) view(fn func(*image)) {
	b.imgMu.RLock()
	defer b.imgMu.RUnlock()
	fn(b.img)
}

// applyThrough applies the log from applied+1 through end, which must be a
// batch end.
func (b *broker) applyThrough(end int64) {
	b.mu.Lock()
	from := b.applied + 1
	b.mu.Unlock()
	b.imgMu.Lock()
	for o := from; o <= end; o++ {
		r, ok, _ := b.c.log.at(o)
		if !ok {
			break
		}
		if err := b.img.apply(o, r.Value); err != nil {
			b.c.cfg.logger.Error("localcluster: broker cannot apply metadata record", "node", b.node, "offset", o, "err", err)
		}
	}
	// The applied offset moves before the image is readable again: an
	// answer rendered from the image (whose header carries the image's
	// offset) is never followed by one whose applied offset is lower, so
	// a broker's tokens never decrease. Lock order: imgMu, then mu.
	b.mu.Lock()
	if end > b.applied {
		b.applied = end
		close(b.appliedCh)
		b.appliedCh = make(chan struct{})
	}
	b.mu.Unlock()
	b.imgMu.Unlock()
}

// run is the applier. It ends when the cluster closes.
func (b *broker) run() {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		b.mu.Lock()
		next, paused, lag := b.applied+1, b.paused, b.lag
		b.mu.Unlock()

		r, ok, grew := b.c.log.at(next)
		var wait <-chan time.Time
		switch {
		case paused:
		case !ok:
		default:
			due := time.Until(r.Committed.Add(lag))
			if due <= 0 {
				b.applyThrough(r.BatchEnd)
				continue
			}
			timer.Reset(due)
			wait = timer.C
		}
		select {
		case <-b.c.done:
			return
		case <-grew: // nil unless caught up
		case <-b.wake:
		case <-wait:
			continue
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// waitApplied blocks until the broker has applied offset, ctx ends, stop
// closes or the cluster closes; it reports whether offset was applied.
func (b *broker) waitApplied(ctx context.Context, offset int64, stop <-chan struct{}) bool {
	for {
		b.mu.Lock()
		applied, ch := b.applied, b.appliedCh
		b.mu.Unlock()
		if applied >= offset {
			return true
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		case <-stop:
			return false
		case <-b.c.done:
			return false
		}
	}
}
