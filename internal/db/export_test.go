package db

// OnPipelineBatch sets the hook told the size of each batch a Pipeline sends.
func OnPipelineBatch(f func(statements int)) { onPipelineBatch = f }
