package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The JSON form of a record, one object per line: what consume -o json
// prints and produce --input-format json reads back.
//
// Every field of bytes (key, value, a header's key and value) comes with
// an encoding field beside it: "utf8" when the bytes are valid UTF-8 and
// the field is that text, "base64" otherwise (standard encoding, with
// padding). A null key or value (a tombstone) is JSON null, with no
// encoding; an empty one is "". Headers are a list, in the record's order,
// repeated keys kept. On input an absent encoding means utf8.
const (
	encUTF8   = "utf8"
	encBase64 = "base64"
)

type recordJSON struct {
	Topic         string       `json:"topic,omitempty"`
	Partition     *int32       `json:"partition,omitempty"`
	Offset        *int64       `json:"offset,omitempty"`
	Timestamp     *int64       `json:"timestamp,omitempty"` // milliseconds since the Unix epoch
	Key           *string      `json:"key"`
	KeyEncoding   string       `json:"key_encoding,omitempty"`
	Value         *string      `json:"value"`
	ValueEncoding string       `json:"value_encoding,omitempty"`
	Headers       []headerJSON `json:"headers,omitempty"`
	TokenApplied  string       `json:"token_applied,omitempty"`
}

type headerJSON struct {
	Key           string  `json:"key"`
	KeyEncoding   string  `json:"key_encoding,omitempty"`
	Value         *string `json:"value"`
	ValueEncoding string  `json:"value_encoding,omitempty"`
}

// encodeBytes returns b as a JSON string field and its encoding; nil is
// null.
func encodeBytes(b []byte) (*string, string) {
	if b == nil {
		return nil, ""
	}
	if utf8.Valid(b) {
		s := string(b)
		return &s, encUTF8
	}
	s := base64.StdEncoding.EncodeToString(b)
	return &s, encBase64
}

// decodeBytes reads a field written by encodeBytes (or by hand: no
// encoding is utf8).
func decodeBytes(field string, s *string, enc string) ([]byte, error) {
	if s == nil {
		if enc != "" && enc != encUTF8 && enc != encBase64 {
			return nil, fmt.Errorf("%s_encoding %q: want %s or %s", field, enc, encUTF8, encBase64)
		}
		return nil, nil
	}
	switch enc {
	case "", encUTF8:
		return []byte(*s), nil
	case encBase64:
		b, err := base64.StdEncoding.Strict().DecodeString(*s)
		if err != nil {
			return nil, fmt.Errorf("%s: not base64 (%s_encoding is base64): %w", field, field, err)
		}
		return b, nil
	}
	return nil, fmt.Errorf("%s_encoding %q: want %s or %s", field, enc, encUTF8, encBase64)
}

// toRecordJSON is r's JSON form; tok is the token waited for, if any.
func toRecordJSON(r *kgo.Record, tok string) recordJSON {
	p, off := r.Partition, r.Offset
	out := recordJSON{Topic: r.Topic, Partition: &p, Offset: &off, TokenApplied: tok}
	if !r.Timestamp.IsZero() {
		ts := r.Timestamp.UnixMilli()
		out.Timestamp = &ts
	}
	out.Key, out.KeyEncoding = encodeBytes(r.Key)
	out.Value, out.ValueEncoding = encodeBytes(r.Value)
	for _, h := range r.Headers {
		var hj headerJSON
		k, kenc := encodeBytes(append([]byte{}, h.Key...)) // never null
		hj.Key, hj.KeyEncoding = *k, kenc
		hj.Value, hj.ValueEncoding = encodeBytes(h.Value)
		out.Headers = append(out.Headers, hj)
	}
	return out
}

// partitionGiven marks, in a record's Context, that its partition was
// given in the input.
type partitionGiven struct{}

// parseRecordJSON reads one line of JSON input into a record for topic.
// The line's topic, offset and token_applied are ignored: they say where
// a consumed record came from. A partition given is used as it is (the
// produce fails if the topic has no such partition); a timestamp given
// (milliseconds since the Unix epoch) is the record's.
func parseRecordJSON(ctx context.Context, line []byte, topic string) (*kgo.Record, error) {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	var in recordJSON
	if err := dec.Decode(&in); err != nil {
		return nil, fmt.Errorf("not a JSON record: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("not a JSON record: more after the object")
	}
	r := &kgo.Record{Topic: topic}
	var err error
	if r.Key, err = decodeBytes("key", in.Key, in.KeyEncoding); err != nil {
		return nil, err
	}
	if r.Value, err = decodeBytes("value", in.Value, in.ValueEncoding); err != nil {
		return nil, err
	}
	for i, h := range in.Headers {
		k, err := decodeBytes(fmt.Sprintf("headers[%d].key", i), &h.Key, h.KeyEncoding)
		if err != nil {
			return nil, err
		}
		v, err := decodeBytes(fmt.Sprintf("headers[%d].value", i), h.Value, h.ValueEncoding)
		if err != nil {
			return nil, err
		}
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: string(k), Value: v})
	}
	if in.Partition != nil {
		if *in.Partition < 0 {
			return nil, fmt.Errorf("partition %d: want 0 or more", *in.Partition)
		}
		r.Partition = *in.Partition
		r.Context = context.WithValue(ctx, partitionGiven{}, true)
	}
	if in.Timestamp != nil {
		if *in.Timestamp < 0 {
			return nil, fmt.Errorf("timestamp %d: want milliseconds since the Unix epoch, 0 or more", *in.Timestamp)
		}
		r.Timestamp = time.UnixMilli(*in.Timestamp)
	}
	return r, nil
}

// givenPartitioner sends a record whose partition was given in the input
// to that partition, and any other as franz-go's sticky key partitioner
// does (the Java client's hash for keyed records).
type givenPartitioner struct{ def kgo.Partitioner }

func newGivenPartitioner() kgo.Partitioner {
	return givenPartitioner{kgo.StickyKeyPartitioner(nil)}
}

func (p givenPartitioner) ForTopic(t string) kgo.TopicPartitioner {
	return &givenTopicPartitioner{p.def.ForTopic(t)}
}

type givenTopicPartitioner struct{ def kgo.TopicPartitioner }

func given(r *kgo.Record) bool {
	return r.Context != nil && r.Context.Value(partitionGiven{}) != nil
}

func (p *givenTopicPartitioner) RequiresConsistency(r *kgo.Record) bool {
	return given(r) || p.def.RequiresConsistency(r)
}

func (p *givenTopicPartitioner) Partition(r *kgo.Record, n int) int {
	if given(r) {
		return int(r.Partition)
	}
	return p.def.Partition(r, n)
}

func (p *givenTopicPartitioner) OnNewBatch() {
	if nb, ok := p.def.(kgo.TopicPartitionerOnNewBatch); ok {
		nb.OnNewBatch()
	}
}
