package importer

import "bytes"

// importPath imports the file at path and collects its runs.
func importPath(format, path string, opts Options) ([]Run, error) {
	var runs []Run
	out := NewOutput(func(r Run) error { runs = append(runs, r); return nil })
	err := ImportFile(format, path, opts, out)
	return runs, err
}

// importData imports data as the file named file and collects its runs.
func importData(format, file string, data []byte, opts Options) ([]Run, error) {
	var runs []Run
	out := NewOutput(func(r Run) error { runs = append(runs, r); return nil })
	err := Import(format, file, bytes.NewReader(data), opts, out)
	return runs, err
}
