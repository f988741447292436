package wire

import "github.com/twmb/franz-go/pkg/kmsg"

// flexibleFrom[key] is the first version of key whose request header is
// flexible (RequestHeader v2), or -1 when no version is or the key is
// unknown. kmsg knows each request's flexible versions; flexibility never
// goes away in a later version, so one number per key is enough and the hot
// path is an index, not a call through an interface.
var flexibleFrom = buildFlexibleFrom()

func buildFlexibleFrom() []int16 {
	from := make([]int16, kmsg.MaxKey+1)
	for key := range from {
		from[key] = -1
		req := kmsg.RequestForKey(int16(key))
		if req == nil {
			continue
		}
		for v := int16(0); v <= req.MaxVersion(); v++ {
			req.SetVersion(v)
			if req.IsFlexible() {
				from[key] = v
				break
			}
		}
	}
	return from
}

// requestFlexible reports whether requests of key at version carry a
// flexible header. Unknown keys are treated as not flexible: their bytes
// pass through untouched.
func requestFlexible(key, version int16) bool {
	if key < 0 || int(key) >= len(flexibleFrom) {
		return false
	}
	from := flexibleFrom[key]
	return from >= 0 && version >= from
}

// responseFlexible reports whether the response to key at version has a
// flexible header. ApiVersions is the exception: its response header stays
// v0 so that a client can read it before it knows the broker's versions.
func responseFlexible(key, version int16) bool {
	return key != apiVersionsKey && requestFlexible(key, version)
}
