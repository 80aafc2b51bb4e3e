package objjson

import "math"

// Deeper tells whether the JSON document b nests objects and arrays deeper
// than max, counting brackets outside strings in one pass without parsing;
// it stops at the first bracket past max.
func Deeper(b []byte, max int) bool { return depth(b, max) > max }

// Depth is how deep the JSON document b nests objects and arrays, counted
// as Deeper counts them.
func Depth(b []byte) int { return depth(b, math.MaxInt) }

// depth is how deep b nests, or the first depth past limit once it is
// reached.
func depth(b []byte, limit int) int {
	level, deepest, inString, escaped := 0, 0, false, false
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			default:
				// Step over the string's plain bytes at once.
				i += Plain(b[i+1:])
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			level++
			if level > deepest {
				deepest = level
				if deepest > limit {
					return deepest
				}
			}
		case c == '}' || c == ']':
			level--
		}
	}
	return deepest
}
