// Package snapshot owns Setpoint's backup file: a consistent copy of every
// key of a store at one revision, and the code that takes it through the
// store contract (Save) and reads it back (Reader).
//
// # Format (version 1)
//
// All integers are big-endian.
//
//	magic    "SETPOINT-SNAPSHOT\n" (18 bytes)
//	version  uint32 (1)
//	header   uint32 length, then that many bytes of JSON (Header)
//	records  Header.Keys times: uint32 key length, key, uint32 value length,
//	         value, int64 CreateRevision, int64 ModRevision
//	trailer  the sha256 of every byte before it (32 bytes)
//
// The header comes first, with the counts, so that a reader knows how many
// records to expect and a truncated file is told from a whole one even
// before the checksum is compared.
//
// It imports store only: it knows no backend.
package snapshot
