package factory

import (
	"fmt"
	"strconv"
	"strings"
)

// ConsistencyMode says where a factory's consistency tokens come from.
type ConsistencyMode uint8

const (
	// ModeAuto, the default: tokens from brokers that send them
	// (KIP-1243), tokens made from KRaft's own offsets on brokers that do
	// not (Apache Kafka 3.x and 4.x), and plain franz-go behaviour, with
	// one warning and an EventConsistencyOff, where neither works (no
	// FinalizedFeaturesEpoch, no DescribeQuorum). A principal refused
	// DescribeQuorum (no DESCRIBE on CLUSTER) keeps what needs no
	// cluster ACL: see EventConsistencyLimited.
	ModeAuto ConsistencyMode = iota
	// ModeNative uses only tokens that brokers send in response headers:
	// on a broker without KIP-1243 the clients are as stale as plain
	// franz-go.
	ModeNative
	// ModeEmulated makes tokens from KRaft offsets for every broker, even
	// one that sends tokens of its own. Mostly for tests and comparisons.
	ModeEmulated
	// ModeOff sends and keeps no tokens: plain franz-go behaviour, with
	// the KIP-1242 misroute protection still on.
	ModeOff
)

// String returns the property value of m.
func (m ConsistencyMode) String() string {
	switch m {
	case ModeAuto:
		return "auto"
	case ModeNative:
		return "native"
	case ModeEmulated:
		return "emulated"
	case ModeOff:
		return "off"
	}
	return "ConsistencyMode(" + strconv.Itoa(int(m)) + ")"
}

// ParseConsistencyMode parses the consistency.mode property: auto, native,
// emulated or off.
func ParseConsistencyMode(s string) (ConsistencyMode, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "auto":
		return ModeAuto, nil
	case "native":
		return ModeNative, nil
	case "emulated":
		return ModeEmulated, nil
	case "off":
		return ModeOff, nil
	}
	return 0, fmt.Errorf("%w: consistency.mode %q: want auto, native, emulated or off", ErrConfig, s)
}

// Consistency sets where tokens come from (property consistency.mode);
// the default is ModeAuto. A factory-wide setting.
func Consistency(m ConsistencyMode) Opt {
	return factoryOpt(func(c *config) {
		if m > ModeOff {
			c.fail("consistency.mode: unknown mode %d", m)
			return
		}
		c.mode = m
	})
}
