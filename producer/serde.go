package producer

import (
	"encoding/json"
	"fmt"
)

// Serializer turns a value of T into record bytes. A nil result is a null
// key or value.
type Serializer[T any] interface {
	Serialize(topic string, v T) ([]byte, error)
}

// SerializerFunc adapts a function to Serializer.
type SerializerFunc[T any] func(topic string, v T) ([]byte, error)

// Serialize calls fn.
func (fn SerializerFunc[T]) Serialize(topic string, v T) ([]byte, error) { return fn(topic, v) }

// Bytes passes byte slices through unchanged (nil stays null). A producer
// takes such keys or values as they are, without calling it.
func Bytes() Serializer[[]byte] { return bytesSerializer{} }

type bytesSerializer struct{}

func (bytesSerializer) Serialize(_ string, v []byte) ([]byte, error) { return v, nil }

// String encodes strings as UTF-8 bytes. The empty string is an empty, not
// a null, key or value.
func String() Serializer[string] {
	return SerializerFunc[string](func(_ string, v string) ([]byte, error) { return []byte(v), nil })
}

// JSON encodes values with encoding/json.
func JSON[T any]() Serializer[T] {
	return SerializerFunc[T](func(topic string, v T) ([]byte, error) {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("json: %w", err)
		}
		return b, nil
	})
}
