package stream

import (
	"reflect"
	"testing"

	"tau2rl/schemas"
)

func TestFramedRoundTrip(t *testing.T) {
	f := schemas.Framed{Key: "task-1", Value: []byte{1, 2}, Headers: schemas.Headers(schemas.ContentTypeArrowStream, schemas.MessageTypeTrajectories)}
	m := FromFramed(f)
	if string(m.Key) != "task-1" || len(m.Headers) != 3 {
		t.Fatalf("message %+v", m)
	}
	for i := 1; i < len(m.Headers); i++ {
		if m.Headers[i-1].Key >= m.Headers[i].Key {
			t.Fatalf("headers not sorted: %v", m.Headers)
		}
	}
	if got := HeaderMap(m); !reflect.DeepEqual(got, f.Headers) {
		t.Fatalf("HeaderMap = %v, want %v", got, f.Headers)
	}
	if HeaderMap(Message{Headers: []Header{{Key: "a", Value: []byte("1")}, {Key: "a", Value: []byte("2")}}})["a"] != "2" {
		t.Fatal("last repeated header must win")
	}
	if FromFramed(schemas.Framed{Key: "k"}).Headers != nil {
		t.Fatal("no headers must stay nil")
	}
}
