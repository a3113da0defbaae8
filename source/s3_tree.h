// Maps the keys of an S3 listing to a POSIX tree: the key "a/b/c.jpg" under
// the prefix is the file "a/b/c.jpg" in the directories "a" and "a/b". A key
// ending in '/' (a "directory marker", as consoles make) is a directory.
//
// Keys that cannot be such a path are skipped and listed with the reason
// (so `granary dataset show` shows them): an empty component ("a//b"), "."
// or "..", a component over 255 bytes, a path over 4,095 bytes, and a key
// that is both an object and the prefix of other keys ("a" beside "a/b":
// the directory is kept).
//
// Entries are owned by root; files are 0440 and directories 0550 when the
// location names a group of readers (as that group), else 0400 and 0500.
// A file's mtime and ctime are its Last-Modified; a directory's are the
// newest of what lies beneath it. Files have no device or inode (never hard
// links) and carry their ETag.
//
// Thread-safety: a pure function.
#ifndef GRANARY_SOURCE_S3_TREE_H_
#define GRANARY_SOURCE_S3_TREE_H_

#include <vector>

#include "common/source_access/s3_location.h"
#include "source/s3_xml.h"
#include "source/source.h"

namespace granary {

// `objects` are the keys listed under `location.prefix`.
ScannedTree TreeOfObjects(const std::vector<S3Object>& objects, const S3Location& location);

}  // namespace granary

#endif  // GRANARY_SOURCE_S3_TREE_H_
