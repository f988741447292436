package main

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestDRSummary: per switch, the first acknowledgement after it (of any
// record) and that of the first record sent after it; a failed record is
// no acknowledgement; a switch with none before the next is counted
// apart; lost is acknowledged minus stored.
func TestDRSummary(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 19, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	r := &drResult{
		Clients:  drNames[:2],
		Switches: []time.Time{at(1000), at(2000), at(3000)},
		Records: [][]*drRecord{
			{
				{sent: at(990), done: at(995)},                          // before the first switch
				{sent: at(995), done: at(1030)},                         // in flight at it: first ack +30
				{sent: at(1005), done: at(1010), err: errors.New("no")}, // failed: not an ack
				{sent: at(1010), done: at(1045)},                        // first sent after: +45
				{sent: at(2010), done: at(3500)},                        // second switch: none before the third
				{sent: at(3001), done: at(3200)},                        // third: +200
				{sent: at(3002)},                                        // never answered
			},
			{},
		},
		InA: []int64{2, 0}, InB: []int64{1, 0},
	}
	s := r.summary(0)
	require.Equal(t, []float64{30, 200}, s.FirstAck)
	require.Equal(t, []float64{45, 200}, s.SentAfter)
	require.Equal(t, 1, s.Missing)
	require.Equal(t, 7, s.Sent)
	require.Equal(t, 5, s.Acked)
	require.Equal(t, 1, s.Failed)
	require.Equal(t, int64(2), r.drLost(0), "5 acknowledged, 3 stored")
	require.Equal(t, 3, r.summary(1).Missing)

	var w bytes.Buffer
	drMarkdown(&w, r, drConfig{Switches: 3, Every: time.Second, Warm: time.Second, Rate: 100})
	require.Contains(t, w.String(), "| factory | 3 | 30 | 30 | 200 | 45 | 1 | 7 | 5 | 1 | 2 + 1 | 2 |")
	require.Contains(t, w.String(), "- factory: 30, 200\n")
}
