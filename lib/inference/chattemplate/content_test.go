package chattemplate

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestContentText(t *testing.T) {
	for _, tc := range []struct {
		raw, want, err string
	}{
		{``, "", ""},
		{`null`, "", ""},
		{`"hello"`, "hello", ""},
		{`[{"type":"text","text":"a"},{"type":"text","text":"b"}]`, "ab", ""},
		{`[]`, "", ""},
		{`[{"type":"image_url","image_url":{"url":"x"}}]`, "", `content part 0 of type "image_url" is not supported`},
		{`[{"type":"text"}]`, "", `content part 0 of type "text" is not supported`},
		{`42`, "", "content must be a string, null or an array of text parts"},
		{`"unterminated`, "", "content:"},
	} {
		got, err := ContentText(json.RawMessage(tc.raw))
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.raw, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: error %v, want one containing %q", tc.raw, err, tc.err)
		case got != tc.want:
			t.Errorf("%s: %q, want %q", tc.raw, got, tc.want)
		}
	}
}
