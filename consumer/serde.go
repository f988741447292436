package consumer

import (
	"encoding/json"
	"fmt"
)

// Deserializer turns record bytes into a value of T. data is nil for a null
// key or value.
type Deserializer[T any] interface {
	Deserialize(topic string, data []byte) (T, error)
}

// DeserializerFunc adapts a function to Deserializer.
type DeserializerFunc[T any] func(topic string, data []byte) (T, error)

// Deserialize calls fn.
func (fn DeserializerFunc[T]) Deserialize(topic string, data []byte) (T, error) {
	return fn(topic, data)
}

// Bytes passes bytes through unchanged: a key or value is the slice franz-go
// decoded it into, never a copy. It shares memory with the rest of its fetch
// and keeps that memory alive while it is held; franz-go never writes to it
// again, so it stays valid as long as it is held. One exception, which the
// caller opts into: a client given kgo.WithPools reuses that memory, and
// then a Bytes() slice that Records handed over is valid only until the loop
// body returns (copy it with bytes.Clone to keep it). Never modify it in
// place: the record's headers and its neighbours share the memory.
func Bytes() Deserializer[[]byte] { return bytesDeserializer{} }

// bytesDeserializer is Bytes(); the consumer recognises it and takes the
// record's slice without calling it.
type bytesDeserializer struct{}

func (bytesDeserializer) Deserialize(_ string, b []byte) ([]byte, error) { return b, nil }

// String decodes bytes as a string (a null becomes "").
func String() Deserializer[string] {
	return DeserializerFunc[string](func(_ string, b []byte) (string, error) { return string(b), nil })
}

// JSON decodes values with encoding/json. A null key or value is an error,
// since it has no JSON value.
func JSON[T any]() Deserializer[T] {
	return DeserializerFunc[T](func(_ string, b []byte) (T, error) {
		var v T
		if b == nil {
			return v, fmt.Errorf("json: null data")
		}
		if err := json.Unmarshal(b, &v); err != nil {
			return v, fmt.Errorf("json: %w", err)
		}
		return v, nil
	})
}
