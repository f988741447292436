package localcluster

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/kconsist/kconsist/internal/wire"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func stampedFrame(t testing.TB, req kmsg.Request, st *headerState) []byte {
	var frame []byte
	r := &rawClient{t: t, conn: &captureConn{out: &frame}}
	r.send(req, st)
	return frame
}

func TestParseRequestHeader(t *testing.T) {
	cid := "c1"
	for _, tc := range []struct {
		name     string
		frame    []byte
		hasState bool
		token    int64
		err      bool
	}{
		{"flexible, no state", stampedFrame(t, metadataReq("a"), nil), false, 0, false},
		{"token only", stampedFrame(t, metadataReq("a"), &headerState{token: 7}), true, 7, false},
		{"cluster and token", stampedFrame(t, metadataReq("a"), &headerState{clusterID: &cid, token: 9}), true, 9, false},
		{"short", []byte{0, 0, 0, 2, 0, 3}, false, 0, true},
		{"unknown key", append([]byte{0, 0, 0, 10}, 0x7f, 0x00, 0, 0, 0, 0, 0, 1, 0xff, 0xff), false, 0, true},
		{"client id too long", append([]byte{0, 0, 0, 10}, 0, 3, 0, 12, 0, 0, 0, 1, 0x7f, 0xff), false, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := parseRequestHeader(tc.frame)
			if tc.err {
				require.ErrorIs(t, err, ErrMalformedRequest)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.hasState, h.hasState)
			if tc.hasState {
				require.Equal(t, tc.token, h.state.Token)
			}
			req := kmsg.NewPtrMetadataRequest()
			req.SetVersion(h.version)
			require.NoError(t, req.ReadFrom(tc.frame[h.bodyOff:]), "body starts after the header")
		})
	}
}

func FuzzParseRequestHeader(f *testing.F) {
	cid := "c"
	f.Add(stampedFrame(f, metadataReq("a"), nil))
	f.Add(stampedFrame(f, metadataReq("a"), &headerState{clusterID: &cid, token: 3}))
	f.Add(stampedFrame(f, createTopicsReq(1, nil, "x"), &headerState{token: 1}))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < 4 {
			return
		}
		binary.BigEndian.PutUint32(b, uint32(len(b)-4))
		h, err := parseRequestHeader(b)
		if err != nil {
			if !errors.Is(err, ErrMalformedRequest) {
				t.Fatalf("error does not wrap ErrMalformedRequest: %v", err)
			}
			return
		}
		if h.bodyOff < 14 || h.bodyOff > len(b) {
			t.Fatalf("body offset %d out of %d", h.bodyOff, len(b))
		}
	})
}

func FuzzParseResponseHeader(f *testing.F) {
	f.Add(appendResponseFrame(nil, 1, true, []rawTag{{tag: 3, data: []byte{1}}}, "c", 5, []byte{1, 2}), true)
	f.Add(appendResponseFrame(nil, 1, false, nil, "c", 5, []byte{1, 2}), false)
	f.Fuzz(func(t *testing.T, b []byte, flexible bool) {
		if len(b) < 4 {
			return
		}
		h, err := parseResponseHeader(b, flexible)
		if err != nil {
			return
		}
		// What parses re-stamps, and the stamp parses back.
		out := appendResponseFrame(nil, h.corr, flexible, h.tags, "c", 5, b[h.bodyOff:])
		h2, err := parseResponseHeader(out, flexible)
		if err != nil {
			t.Fatalf("restamped frame does not parse: %v", err)
		}
		if string(out[h2.bodyOff:]) != string(b[h.bodyOff:]) {
			t.Fatal("body changed")
		}
		if flexible {
			var st wire.State
			_, err := wire.EachTag(out[8:], func(tag uint64, data []byte) error {
				if tag != 0 {
					return nil
				}
				var perr error
				st, perr = wire.ParseState(data)
				return perr
			}, new([]byte))
			if err != nil || st.Token != 5 {
				t.Fatalf("stamp lost: %v %+v", err, st)
			}
		}
	})
}
