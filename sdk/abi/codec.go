package abi

import "time"

//go:generate go run ./internal/gencodec

// The codec of each document is generated into codec_gen.go from the type
// definitions in abi.go (see internal/gencodec for the abi tags and the
// //abi:document directive). Each document has:
//   - AppendJSON(b) appending its encoding (empty members omitted),
//   - MarshalJSON and UnmarshalJSON, so encoding/json uses the same format,
//   - decode, the member-by-member reader; unknown members are skipped so a
//     newer peer's additions do not break an older one. It reads members in
//     a loop rather than through callbacks, so that the decoder stays on
//     the stack.
// Requests also have DecodeAliased, whose RawJSON members and map strings
// alias the input instead of copying it, which reuses the maps the request
// already holds, and which skips nested values without validating them (the
// input comes from the host): the guest SDK uses it on its reused input
// buffer. The reconcile response has DecodeOwned, for the host, which
// decodes the one copy it makes of a guest's output.

func millis(d time.Duration) int64 { return int64(d / time.Millisecond) }
