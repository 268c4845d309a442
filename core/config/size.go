package config

import "github.com/sluicehq/sluice/sdk/strategy"

// Size is a number of bytes. In configuration it is written as a plain
// integer (bytes) or an integer followed by a unit, with an optional space:
//
//	B                      1
//	KB  MB  GB  TB  PB     powers of 1000
//	KiB MiB GiB TiB PiB    powers of 1024
//
// Units are case-insensitive ("64mib" is 64 MiB). Fractions and negative
// sizes are rejected. The grammar is strategy.ParseSize's, so strategy
// parameters and the edge's own keys read sizes the same way. The zero Size
// is 0 bytes; what zero means is documented on each field that has a Size.
type Size int64

// Common sizes.
const (
	Byte Size = 1
	KiB  Size = 1 << 10
	MiB  Size = 1 << 20
	GiB  Size = 1 << 30
	TiB  Size = 1 << 40
	PiB  Size = 1 << 50
)

// ParseSize parses a size such as "64MiB", "16MB", "1 KiB" or "1048576"
// (see strategy.ParseSize).
func ParseSize(s string) (Size, error) {
	n, err := strategy.ParseSize(s)
	return Size(n), err
}

// Bytes returns s as a number of bytes.
func (s Size) Bytes() int64 { return int64(s) }

// String formats s with the unit that divides it exactly and gives the
// smallest number, preferring binary units on a tie: "64MiB", "16MB",
// "1KB" for 1000, "1500B". ParseSize reads every string String returns.
func (s Size) String() string { return strategy.Size(s).String() }

// MarshalText implements encoding.TextMarshaler; see String.
func (s Size) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler; see ParseSize.
func (s *Size) UnmarshalText(b []byte) error {
	v, err := ParseSize(string(b))
	if err != nil {
		return err
	}
	*s = v
	return nil
}
