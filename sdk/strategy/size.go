package strategy

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Size is a number of bytes. It is written as a whole number of bytes, or a whole number and
// a unit, with at most one space between them:
//
//	B                      1
//	KB  MB  GB  TB  PB     powers of 1000
//	KiB MiB GiB TiB PiB    powers of 1024
//
// Units are case-insensitive ("64mib" is 64 MiB). Fractions, negative sizes and surrounding
// spaces are refused. This is the one size grammar of Sluice: strategy parameters and the
// edge's configuration (core/config.Size) are both parsed by ParseSize.
type Size int64

// sizeUnits are the units ParseSize reads, lower-cased.
var sizeUnits = map[string]int64{
	"b":  1,
	"kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12, "pb": 1e15,
	"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40, "pib": 1 << 50,
}

// ParseSize parses a size such as "64MiB", "16MB", "1 KiB" or "1048576".
func ParseSize(s string) (Size, error) {
	if s == "" {
		return 0, errors.New("empty size")
	}
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	switch {
	case i == 0 && s[0] == '-':
		return 0, fmt.Errorf("invalid size %q: must not be negative", s)
	case i == 0:
		return 0, fmt.Errorf("invalid size %q: want an integer and an optional unit such as MiB", s)
	}
	n, err := strconv.ParseInt(s[:i], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("invalid size %q: too large", s)
	}
	if i < len(s) && s[i] == '.' {
		return 0, fmt.Errorf("invalid size %q: fractions are not allowed (write 1536KiB, not 1.5MiB)", s)
	}
	unit := strings.TrimPrefix(s[i:], " ")
	if unit == "" {
		if i < len(s) { // a trailing space and no unit
			return 0, fmt.Errorf("invalid size %q: trailing space", s)
		}
		return Size(n), nil
	}
	mult, ok := sizeUnits[strings.ToLower(unit)]
	if !ok {
		return 0, fmt.Errorf("invalid size %q: unknown unit %q (want B, KB, MB, GB, TB, PB, KiB, MiB, GiB, TiB or PiB)", s, unit)
	}
	if n > math.MaxInt64/mult {
		return 0, fmt.Errorf("invalid size %q: too large", s)
	}
	return Size(n * mult), nil
}

// Bytes is the size in bytes.
func (s Size) Bytes() int64 { return int64(s) }

// String formats s with the unit that divides it exactly and gives the smallest number,
// preferring binary units on a tie: "64MiB", "16MB", "1KB" for 1000, "1500B"; zero is "0".
// ParseSize reads back every string String returns. A negative Size (never parsed, only
// built in Go) is written as a plain number.
func (s Size) String() string {
	if s <= 0 {
		return strconv.FormatInt(int64(s), 10)
	}
	n, best, unit := int64(s), int64(s), "B"
	for _, u := range [...]struct {
		name string
		mult int64
	}{
		{"PiB", 1 << 50}, {"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10},
		{"PB", 1e15}, {"TB", 1e12}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3},
	} {
		if n%u.mult == 0 && n/u.mult < best {
			best, unit = n/u.mult, u.name
		}
	}
	return strconv.FormatInt(best, 10) + unit
}
