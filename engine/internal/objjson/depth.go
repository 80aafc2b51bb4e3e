package objjson

// Deeper tells whether the JSON document b nests objects and arrays deeper
// than max, counting brackets outside strings in one pass without parsing.
func Deeper(b []byte, max int) bool {
	depth, inString, escaped := 0, false, false
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
			depth++
			if depth > max {
				return true
			}
		case c == '}' || c == ']':
			depth--
		}
	}
	return false
}

// Depth is how deep the JSON document b nests objects and arrays, counted
// as Deeper counts them.
func Depth(b []byte) int {
	depth, deepest, inString, escaped := 0, 0, false, false
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
				i += Plain(b[i+1:])
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
			deepest = max(deepest, depth)
		case c == '}' || c == ']':
			depth--
		}
	}
	return deepest
}
