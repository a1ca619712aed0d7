package wrappers

// Sources maps every wrapper of the table to the manual its entry follows,
// "" for an entry that names none or has no unwrap function.
func Sources() map[string]string {
	out := map[string]string{}
	for name, e := range wrapperTable {
		out[name] = e.source
		if e.unwrap == nil {
			out[name] = ""
		}
	}
	return out
}
