package importer

import "bytes"

// importPath imports the file at path into a zero Output, which keeps its
// runs.
func importPath(format, path string, opts Options) ([]Run, error) {
	var out Output
	err := ImportFile(format, path, opts, &out)
	return out.Runs, err
}

// importData imports data as the file named file and collects its runs
// through Emit.
func importData(format, file string, data []byte, opts Options) ([]Run, error) {
	var runs []Run
	out := &Output{Emit: func(r Run) error { runs = append(runs, r); return nil }}
	err := Import(format, file, bytes.NewReader(data), opts, out)
	return runs, err
}
