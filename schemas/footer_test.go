package schemas

import "testing"

func TestParseOffsetsRejects(t *testing.T) {
	for _, s := range []string{
		``, `{}`, `[{"topic":"","partition":0,"first":0,"last":0,"messages":1}]`,
		`[{"topic":"t","partition":-1,"first":0,"last":0,"messages":1}]`,
		`[{"topic":"t","partition":0,"first":5,"last":4,"messages":1}]`,
		`[{"topic":"t","partition":0,"first":0,"last":4,"messages":0}]`,
	} {
		if _, err := ParseOffsets(s); err == nil {
			t.Errorf("ParseOffsets(%q) accepted", s)
		}
	}
	r, err := ParseOffsets(`[{"topic":"t","partition":2,"first":3,"last":9,"messages":4}]`)
	if err != nil || len(r) != 1 || r[0].Last != 9 {
		t.Fatalf("%v %v", r, err)
	}
}

func FuzzParseOffsets(f *testing.F) {
	f.Add(`[{"topic":"t","partition":2,"first":3,"last":9,"messages":4}]`)
	f.Add(`[]`)
	f.Add(`[{"topic":"t","partition":0,"first":-1,"last":0,"messages":1}]`)
	f.Fuzz(func(t *testing.T, s string) {
		rs, err := ParseOffsets(s)
		if err != nil {
			return
		}
		for _, r := range rs {
			if r.Topic == "" || r.Partition < 0 || r.First < 0 || r.Last < r.First || r.Messages < 1 {
				t.Fatalf("accepted bad range %+v", r)
			}
		}
	})
}
