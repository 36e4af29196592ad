package wire

import (
	"bytes"
	"testing"
)

func TestRoundTrips(t *testing.T) {
	put := PutRequest{MapVersion: 7, Key: []byte("k"), Value: []byte("value")}
	p, err := DecodePutRequest(put.Encode(nil))
	if err != nil || p.MapVersion != 7 || string(p.Key) != "k" || string(p.Value) != "value" {
		t.Fatalf("put: %+v %v", p, err)
	}
	id := RequestID{Client: 0xfeed, Seq: 9, Ack: 4}
	put = PutRequest{MapVersion: 7, ID: id, Key: []byte("k"), Value: []byte("value")}
	if p, err = DecodePutRequest(put.Encode(nil)); err != nil || p.ID != id || string(p.Key) != "k" || string(p.Value) != "value" {
		t.Fatalf("put with id: %+v %v", p, err)
	}
	del := DeleteRequest{MapVersion: 5, ID: id, Key: []byte("dk")}
	if d, err := DecodeDeleteRequest(del.Encode(nil)); err != nil || d.MapVersion != 5 || d.ID != id || string(d.Key) != "dk" {
		t.Fatalf("delete: %+v %v", d, err)
	}
	get := KeyRequest{MapVersion: 3, Key: []byte("key")}
	g, err := DecodeKeyRequest(get.Encode(nil))
	if err != nil || g.MapVersion != 3 || string(g.Key) != "key" {
		t.Fatalf("get: %+v %v", g, err)
	}
	scan := ScanRequest{MapVersion: 1, Start: []byte("a"), End: []byte("z"), Limit: 10, MaxBytes: 4096}
	s, err := DecodeScanRequest(scan.Encode(nil))
	if err != nil || string(s.Start) != "a" || string(s.End) != "z" || s.Limit != 10 || s.MaxBytes != 4096 {
		t.Fatalf("scan: %+v %v", s, err)
	}
	mg := MultiGetRequest{MapVersion: 2, Keys: [][]byte{[]byte("a"), {}, []byte("ccc")}}
	m, err := DecodeMultiGetRequest(mg.Encode(nil))
	if err != nil || len(m.Keys) != 3 || string(m.Keys[2]) != "ccc" {
		t.Fatalf("multi-get: %+v %v", m, err)
	}
	sr, err := DecodeScanReply(EncodeScanReply(nil, ScanMore, []Pair{{[]byte("a"), []byte("1")}, {[]byte("b"), nil}}))
	if err != nil || sr.Flags != ScanMore || len(sr.Pairs) != 2 || string(sr.Pairs[0].Value) != "1" {
		t.Fatalf("scan reply: %+v %v", sr, err)
	}
	var b []byte
	b = EncodeMultiGetValue(b, []byte("x"), true)
	b = EncodeMultiGetValue(b, nil, false)
	b = EncodeMultiGetValue(b, nil, true)
	vals, err := DecodeMultiGetReply(b, 3)
	if err != nil || string(vals[0]) != "x" || vals[1] != nil || vals[2] == nil || len(vals[2]) != 0 {
		t.Fatalf("multi-get reply: %q %v", vals, err)
	}
	if v, err := DecodeVersion(EncodeVersion(42)); err != nil || v != 42 {
		t.Fatalf("version: %d %v", v, err)
	}
}

func TestMalformed(t *testing.T) {
	for _, b := range [][]byte{nil, {1, 2, 3}, bytes.Repeat([]byte{0xff}, 20)} {
		if _, err := DecodePutRequest(b); err == nil && len(b) < 12 {
			t.Fatalf("put %x decoded", b)
		}
		if _, err := DecodeScanRequest(b); err == nil {
			t.Fatalf("scan %x decoded", b)
		}
		if _, err := DecodeMultiGetRequest(b); err == nil {
			t.Fatalf("multi-get %x decoded", b)
		}
	}
}

func TestRequestIDStrict(t *testing.T) {
	for _, tc := range []struct {
		id RequestID
		ok bool
	}{
		{RequestID{}, true},
		{RequestID{Client: 1, Seq: 1, Ack: 1}, true},
		{RequestID{Client: 1, Seq: 5, Ack: 0}, true},
		{RequestID{Client: 0, Seq: 1}, false},
		{RequestID{Client: 0, Ack: 1}, false},
		{RequestID{Client: 1, Seq: 0}, false},
		{RequestID{Client: 1, Seq: 2, Ack: 3}, false},
	} {
		put := PutRequest{MapVersion: 1, ID: tc.id, Key: []byte("k"), Value: []byte("v")}
		if _, err := DecodePutRequest(put.Encode(nil)); (err == nil) != tc.ok {
			t.Fatalf("put with %+v: %v, want ok %v", tc.id, err, tc.ok)
		}
		del := DeleteRequest{MapVersion: 1, ID: tc.id, Key: []byte("k")}
		if _, err := DecodeDeleteRequest(del.Encode(nil)); (err == nil) != tc.ok {
			t.Fatalf("delete with %+v: %v, want ok %v", tc.id, err, tc.ok)
		}
	}
	full := (&DeleteRequest{MapVersion: 1, ID: RequestID{Client: 1, Seq: 1}, Key: []byte("k")}).Encode(nil)
	for n := range 8 + RequestIDLen {
		if _, err := DecodeDeleteRequest(full[:n]); err == nil {
			t.Fatalf("delete truncated to %d bytes decoded", n)
		}
	}
}

// FuzzDecode: no decoder panics or returns slices outside its input.
func FuzzDecode(f *testing.F) {
	put := PutRequest{MapVersion: 7, Key: []byte("k"), Value: []byte("value")}
	f.Add(put.Encode(nil))
	put.ID = RequestID{Client: 3, Seq: 2, Ack: 1}
	f.Add(put.Encode(nil))
	del := DeleteRequest{MapVersion: 7, ID: RequestID{Client: 3, Seq: 2, Ack: 2}, Key: []byte("k")}
	f.Add(del.Encode(nil))
	scan := ScanRequest{MapVersion: 1, Start: []byte("a"), End: []byte("z"), Limit: 10, MaxBytes: 4096}
	f.Add(scan.Encode(nil))
	mg := MultiGetRequest{MapVersion: 2, Keys: [][]byte{[]byte("a"), {}, []byte("ccc")}}
	f.Add(mg.Encode(nil))
	f.Add(EncodeScanReply(nil, ScanRegionEnd, []Pair{{[]byte("a"), []byte("1")}}))
	f.Add(EncodeMultiGetValue(EncodeMultiGetValue(EncodeMultiGetValue(nil, []byte("v"), true), nil, false), []byte{}, true))
	f.Add(EncodeVersion(9))
	f.Fuzz(func(t *testing.T, b []byte) {
		if q, err := DecodePutRequest(b); err == nil && !bytes.Equal(q.Encode(nil), b) {
			t.Fatalf("put request does not round-trip")
		}
		if q, err := DecodeDeleteRequest(b); err == nil && !bytes.Equal(q.Encode(nil), b) {
			t.Fatalf("delete request does not round-trip")
		}
		if q, err := DecodeKeyRequest(b); err == nil && !bytes.Equal(q.Encode(nil), b) {
			t.Fatalf("get request does not round-trip")
		}
		if q, err := DecodeScanRequest(b); err == nil {
			if again, err := DecodeScanRequest(q.Encode(nil)); err != nil || !bytes.Equal(again.Start, q.Start) || !bytes.Equal(again.End, q.End) {
				t.Fatalf("scan request does not round-trip")
			}
		}
		if q, err := DecodeMultiGetRequest(b); err == nil && !bytes.Equal(q.Encode(nil), b) {
			t.Fatalf("multi-get request does not round-trip")
		}
		if r, err := DecodeScanReply(b); err == nil && !bytes.Equal(EncodeScanReply(nil, r.Flags, r.Pairs), b) {
			t.Fatalf("scan reply does not round-trip")
		}
		if vs, err := DecodeMultiGetReply(b, 3); err == nil {
			var again []byte
			for _, v := range vs {
				again = EncodeMultiGetValue(again, v, v != nil)
			}
			if len(vs) > 3 || !bytes.Equal(again, b) {
				t.Fatalf("multi-get reply of %d values does not round-trip", len(vs))
			}
		}
		if v, err := DecodeVersion(b); err == nil && !bytes.Equal(EncodeVersion(v), b) {
			t.Fatalf("version does not round-trip")
		}
	})
}

// TestPutRequestEncodeHead: a put's head followed by its value is the
// put's encoding, and decodes to the put.
func TestPutRequestEncodeHead(t *testing.T) {
	q := PutRequest{MapVersion: 7, ID: RequestID{Client: 3, Seq: 9, Ack: 8}, Key: []byte("key"), Value: []byte("value")}
	b := append(q.EncodeHead(nil), q.Value...)
	if want := q.Encode(nil); !bytes.Equal(b, want) {
		t.Fatalf("head+value %x, want %x", b, want)
	}
	got, err := DecodePutRequest(b)
	if err != nil || got.MapVersion != 7 || got.ID != q.ID || string(got.Key) != "key" || string(got.Value) != "value" {
		t.Fatalf("decoded %+v, %v", got, err)
	}
}
