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

// Bytes passes bytes through unchanged.
func Bytes() Deserializer[[]byte] {
	return DeserializerFunc[[]byte](func(_ string, b []byte) ([]byte, error) { return b, nil })
}

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
