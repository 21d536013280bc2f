package codec

// Kinds returns the kinds of the cause table, the registry's included, for
// the tests.
func Kinds() []string { return causes.Kinds() }
