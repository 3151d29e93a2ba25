package engine

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/interlockhq/interlock/protocol"
)

// filler sets every exported field of a value, so that a field added to a
// type written by hand in jsonappend.go and not written there shows up as
// a difference from json.Marshal. Variant 0 is plain values, 1 values
// with everything encoding/json escapes or compacts, 2 zero values in
// non-nil pointers, slices, maps and interfaces, 3 the zero value.
type filler struct {
	variant int
	// data is the next event data type an EventData field gets.
	data int
	// n numbers the values filled in, so that no two fields are alike.
	n int
}

var (
	rawType       = reflect.TypeFor[json.RawMessage]()
	timeType      = reflect.TypeFor[time.Time]()
	eventDataType = reflect.TypeFor[EventData]()
)

// allEventData is one value of each event data type.
func allEventData() []EventData {
	return []EventData{&protocol.Started{}, &protocol.Interrupted{}, &protocol.Resumed{}, &protocol.Completed{}, &protocol.Failed{},
		&protocol.Cancelled{}, &protocol.Expired{}, &protocol.Refused{}, &protocol.Decided{}, &protocol.NodeEvent{}, &protocol.AuditRecord{}, &protocol.Expire{}}
}

func (f *filler) fill(v reflect.Value, depth int) {
	if f.variant == 3 {
		return // zero
	}
	if f.variant == 2 {
		switch v.Kind() {
		case reflect.Pointer, reflect.Struct, reflect.Slice, reflect.Map, reflect.Interface:
			if v.Type() != rawType && v.Type() != timeType {
				break
			}
			fallthrough
		default:
			return // zero
		}
	}
	switch {
	case v.Type() == rawType:
		f.n++
		raws := []string{`{"a":[1,2.5,"x",true,null],"n":%d}`, " { \"a\" : \"<b>&\" , \"c\":\"\u2028é\",\"n\": %d } "}
		v.SetBytes(fmt.Appendf(nil, raws[f.variant], f.n))
		return
	case v.Type() == timeType:
		f.n++
		t := time.Date(2026, 11, 23, 20, 24, 53, 955823093+f.n, time.UTC)
		if f.variant == 1 {
			t = time.Date(1999, 1, 2, 3, 4, 5, 0, time.FixedZone("x", -(3*3600+30*60)))
		}
		v.Set(reflect.ValueOf(t))
		return
	case v.Type() == eventDataType:
		all := allEventData()
		d := all[f.data%len(all)]
		f.data++
		f.fill(reflect.ValueOf(d).Elem(), depth+1)
		v.Set(reflect.ValueOf(d))
		return
	}
	switch v.Kind() {
	case reflect.String:
		f.n++
		s := []string{"plain-value-", "a<b>&\"c\"\\\n\t\u2028\u2029é\xff\x01 end "}[f.variant]
		v.SetString(s + strconv.Itoa(f.n))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64, reflect.Int32:
		f.n++
		v.SetInt([]int64{int64(f.n), -1<<40 - int64(f.n)}[f.variant])
	case reflect.Uint64, reflect.Uint, reflect.Uint32:
		f.n++
		v.SetUint([]uint64{uint64(f.n), 1<<64 - 1 - uint64(f.n)}[f.variant])
	case reflect.Float64:
		v.SetFloat(2.5)
	case reflect.Pointer:
		if depth > 4 {
			return
		}
		p := reflect.New(v.Type().Elem())
		f.fill(p.Elem(), depth+1)
		v.Set(p)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				f.fill(v.Field(i), depth+1)
			}
		}
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := range 2 {
			f.fill(s.Index(i), depth+1)
		}
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		for _, k := range []string{"zeta", "alpha", "<mid>"} {
			e := reflect.New(v.Type().Elem()).Elem()
			if e.Kind() == reflect.Interface {
				e.Set(reflect.ValueOf(k + "-value"))
			} else {
				f.fill(e, depth+1)
			}
			m.SetMapIndex(reflect.ValueOf(k), e)
		}
		v.Set(m)
	case reflect.Interface:
		v.Set(reflect.ValueOf("any-value"))
	}
}

// sameAsMarshal fails unless got is what json.Marshal writes for v.
func sameAsMarshal(t *testing.T, what string, v any, got []byte, err error) {
	t.Helper()
	want, werr := json.Marshal(v)
	if (werr == nil) != (err == nil) {
		t.Fatalf("%s: json.Marshal error %v, AppendJSON error %v", what, werr, err)
	}
	if werr == nil && !bytes.Equal(got, want) {
		t.Fatalf("%s: AppendJSON wrote\n%s\njson.Marshal writes\n%s", what, got, want)
	}
}

func TestAppendJSONIsWhatEncodingJSONWrites(t *testing.T) {
	for variant := range 4 {
		for first := range allEventData() {
			f := &filler{variant: variant, data: first}
			var cp Checkpoint
			f.fill(reflect.ValueOf(&cp).Elem(), 0)
			// An outbox with one message of each data type.
			if variant != 3 {
				cp.Outbox = nil
				for range allEventData() {
					var m Message
					f.fill(reflect.ValueOf(&m).Elem(), 0)
					cp.Outbox = append(cp.Outbox, m)
				}
			}
			got, err := cp.AppendJSON([]byte("prefix"))
			if !bytes.HasPrefix(got, []byte("prefix")) {
				t.Fatalf("variant %d: AppendJSON did not append: %.40s", variant, got)
			}
			sameAsMarshal(t, "checkpoint", &cp, got[len("prefix"):], err)
			for _, m := range cp.Outbox {
				if a, ok := m.Data.(jsonAppender); ok {
					got, err := a.AppendJSON(nil)
					sameAsMarshal(t, reflect.TypeOf(a).String(), a, got, err)
				}
			}
		}
	}
}

func TestAppendJSONWritesNilEventDataAsNull(t *testing.T) {
	for _, a := range []jsonAppender{(*protocol.Started)(nil), (*protocol.Interrupted)(nil), (*protocol.Resumed)(nil),
		(*protocol.Completed)(nil), (*protocol.AuditRecord)(nil)} {
		got, err := a.AppendJSON(nil)
		sameAsMarshal(t, reflect.TypeOf(a).String(), a, got, err)
	}
	cp := Checkpoint{Outbox: []Message{{Kind: "started", Data: (*protocol.Started)(nil)}, {Kind: "x"}}}
	got, err := cp.AppendJSON(nil)
	sameAsMarshal(t, "checkpoint", &cp, got, err)
}

func TestAppendJSONFailsWhereEncodingJSONFails(t *testing.T) {
	late := time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	for name, cp := range map[string]*Checkpoint{
		"a time past year 9999":      {CreatedAt: late},
		"an invalid raw state value": {State: Doc{"a": json.RawMessage(`{"x":`)}},
		"an empty raw resume":        {Resumes: []json.RawMessage{{}}},
		"an invalid audit time":      {Outbox: []Message{{Data: &protocol.AuditRecord{At: late}}}},
		"an invalid raw origin":      {Origin: json.RawMessage(`nope`)},
	} {
		if _, err := cp.AppendJSON(nil); err == nil {
			t.Errorf("%s: AppendJSON wrote it", name)
		}
		if _, err := json.Marshal(cp); err == nil {
			t.Errorf("%s: json.Marshal wrote it (the case tests nothing)", name)
		}
	}
}

// FuzzCheckpointJSON holds Checkpoint.AppendJSON to json.Marshal on every
// checkpoint encoding/json decodes.
func FuzzCheckpointJSON(f *testing.F) {
	f.Add([]byte(`{"flow":"bench","run":"r1","status":"waiting","node":"ask","state":{},"interrupt":{"requestId":"rq_1","node":"ask","index":0,"kind":"question","questions":[{"field":"answer","question":"Go ahead?"}],"fields":["answer"],"askedAt":"2026-11-23T20:24:53.955823093Z"},"createdAt":"2026-11-23T20:24:53.955823093Z","updatedAt":"2026-11-23T20:24:53.955823093Z","audit":{"records":2,"hash":"76"},"cause":{"id":"s-1","key":"s-1","seq":1},"applied":["s-1"],"uid":"q","seq":4,"outbox":[{"stream":"events","kind":"started","id":"q-1","flow":"bench","run":"r1","time":"2026-11-23T20:24:53.955823093Z","data":{"flow":"bench","run":"r1","checkpoint":0}},{"stream":"audit","kind":"started","id":"q-2","flow":"bench","run":"r1","time":"2026-11-23T20:24:53.955823093Z","data":{"flow":"bench","run":"r1","action":"started","at":"2026-11-23T20:24:53.955823093Z","by":"/bench","eventId":"s-1","outcome":{"status":"waiting","node":"ask","requestId":"rq_1","kind":"question"},"seq":1,"hash":"5d"}}],"waited":true}`))
	f.Add([]byte(`{"flow":"f","run":"r","status":"completed","state":{"b":" 1 ","a":"<x>"},"decisions":[{"verdict":"edit","action":"refund","args":{"amount":4800}}],"outbox":[{"stream":"events","kind":"completed","data":{"state":{"z":[1, 2]}}},{"stream":"schedule","kind":"expire","data":{"expiresAt":"2026-01-01T00:00:00Z"}}]}`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		var cp Checkpoint
		if json.Unmarshal(doc, &cp) != nil {
			return
		}
		got, err := cp.AppendJSON(nil)
		sameAsMarshal(t, "checkpoint", &cp, got, err)
	})
}

func TestAuditHashIsTheCanonicalHashOfTheRecordAsPublished(t *testing.T) {
	for variant := range 4 {
		f := &filler{variant: variant}
		var rec protocol.AuditRecord
		f.fill(reflect.ValueOf(&rec).Elem(), 0)
		for _, r := range []protocol.AuditRecord{rec, {Outcome: &protocol.AuditOutcome{}, Approval: &protocol.AuditApproval{}}} {
			published, err := json.Marshal(&r)
			if err != nil {
				t.Fatal(err)
			}
			want, err := protocol.CanonicalHash(published)
			if err != nil {
				t.Fatal(err)
			}
			if got, err := protocol.AuditHash(&r); err != nil || got != want {
				t.Fatalf("variant %d: AuditHash = %s, %v; the canonical hash of\n%s\nis %s", variant, got, err, published, want)
			}
		}
	}
}
