package kafka

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	kafkago "github.com/segmentio/kafka-go"
)

func TestPlanTopics(t *testing.T) {
	topics := []string{"a", "b", "c"}
	tests := []struct {
		name     string
		found    map[string]error
		create   []string
		hidden   []string
		errMatch string
	}{
		{"all exist", map[string]error{"a": nil, "b": nil, "c": nil}, nil, nil, ""},
		{"one unknown", map[string]error{"a": nil, "b": kafkago.UnknownTopicOrPartition, "c": nil}, []string{"b"}, nil, ""},
		{"absent from the answer", map[string]error{"a": nil, "c": nil}, []string{"b"}, nil, ""},
		{"not describable", map[string]error{"a": kafkago.TopicAuthorizationFailed, "b": nil, "c": nil}, []string{"a"}, []string{"a"}, ""},
		{"leader election counts as existing", map[string]error{"a": kafkago.LeaderNotAvailable, "b": nil, "c": kafkago.NotLeaderForPartition}, nil, nil, ""},
		{"wrapped unknown", map[string]error{"a": fmt.Errorf("x: %w", kafkago.UnknownTopicOrPartition), "b": nil, "c": nil}, []string{"a"}, nil, ""},
		{"other error", map[string]error{"a": nil, "b": kafkago.InvalidTopic, "c": nil}, nil, nil, "metadata of topic b"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			create, hidden, err := planTopics(topics, tc.found)
			if tc.errMatch != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errMatch) {
					t.Fatalf("err = %v, want one containing %q", err, tc.errMatch)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(create, tc.create) {
				t.Errorf("create %v, want %v", create, tc.create)
			}
			var h []string
			for _, tp := range topics {
				if hidden[tp] {
					h = append(h, tp)
				}
			}
			if !reflect.DeepEqual(h, tc.hidden) {
				t.Errorf("hidden %v, want %v", h, tc.hidden)
			}
		})
	}
}

func TestTopicAuthorizationErrorText(t *testing.T) {
	tests := []struct {
		name string
		err  *TopicAuthorizationError
		want string
	}{
		{"missing, known principal", &TopicAuthorizationError{Principal: "User:p", Missing: []string{"t1", "t2"}, Err: kafkago.TopicAuthorizationFailed},
			"kafka: ensure topics: topics t1, t2 do not exist and principal User:p may not create them (" + kafkago.TopicAuthorizationFailed.Error() +
				"). Create the topics ahead of time with an administrator's credentials (docs/OPERATIONS.md, \"Kafka: topics and principals\"), " +
				"or grant CREATE, e.g. kafka-acls.sh --add --allow-principal User:p --operation Create --topic t1 --topic t2"},
		{"hidden, principal from the broker", &TopicAuthorizationError{Hidden: []string{"h"}, Err: kafkago.ClusterAuthorizationFailed},
			"kafka: ensure topics: topics h are not visible to this client's principal (no DESCRIBE permission, which READ or WRITE on the topic implies) and it may not create them (" +
				kafkago.ClusterAuthorizationFailed.Error() + "). Create the topics ahead of time with an administrator's credentials (docs/OPERATIONS.md, \"Kafka: topics and principals\"), " +
				"or grant CREATE, e.g. kafka-acls.sh --add --allow-principal User:<principal> --operation Create --topic h; " +
				"and for topics the role reads or writes, grant READ or WRITE (kafka-acls.sh --add --allow-principal User:<principal> --operation Read|Write --topic …)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.err.Error(); got != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
			if !errors.Is(tc.err, tc.err.Err) {
				t.Error("does not unwrap to the broker error")
			}
		})
	}
}

func TestDedupe(t *testing.T) {
	if got := dedupe([]string{"b", "a", "b", "c", "a"}); !reflect.DeepEqual(got, []string{"b", "a", "c"}) {
		t.Fatalf("dedupe = %v", got)
	}
}
