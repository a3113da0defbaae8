// granary._granary: the extension module under the Python package `granary`,
// a thin binding of libgranary (client/granary_client.h). The package's
// Python code (python/granary) is the public API; this module gives it:
//
//   Client(socket="", read_through=True)
//     .read_many(dataset, paths, errors="raise", version=0) -> list[bytes]
//     .open_file(dataset, path, version=0) -> File
//     .datasets() -> list[str]
//     .list(dataset, version=0) -> list[(path, size, type, mode, mtime_ns)]
//   File.size, File.read_at(offset, buffer) -> int, File.read(offset, size)
//
// Reads place the bytes where Python keeps them: read_many makes each
// file's bytes object first and has libgranary read into it, so a batch is
// copied once, from the cache to its final object. Every call that waits on
// granaryd or the disk releases the GIL, so that other threads (a batch
// read ahead, a decoder) run meanwhile.
//
// Errors are Python's own exceptions, naming the path or dataset:
// FileNotFoundError (NOT_FOUND), PermissionError (PERMISSION_DENIED),
// ValueError (INVALID_ARGUMENT: a directory or symlink where a regular file
// was asked for, a malformed request), TimeoutError (DEADLINE_EXCEEDED),
// ConnectionError (UNAVAILABLE: granaryd unreachable, a fetch that may
// succeed when tried again) and OSError with EIO otherwise.
//
// Importing the module makes glibc's malloc keep the memory of freed batches
// (KeepLargeBuffersInTheHeap) unless the process tuned malloc itself.
//
// Thread-safety: a Client and its Files may be used from several threads at
// once (libgranary's are). A process forked from one that used a Client may
// keep using it: libgranary connects again in the child.
#include <Python.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/granary_client.h"
#include "common/base/absl_compat.h"
#include "common/base/heap_buffers.h"
#include "common/dataset/manifest.h"

namespace granary {
namespace {

namespace py = pybind11;

py::str Utf8(std::string_view text) {
  // Messages quote paths as granaryd printed them; a byte that is not UTF-8
  // must not turn an error into another one.
  PyObject* decoded =
      PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), "backslashreplace");
  if (decoded == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(decoded);
}

// The exception object for `status` (not OK), about `name`: a path of a
// dataset, a dataset, or None.
py::object ExceptionFor(const absl::Status& status, const py::object& name) {
  py::str message = Utf8(AsStd(status.message()));
  PyObject* type = PyExc_OSError;
  int error = EIO;
  switch (status.code()) {
    case absl::StatusCode::kNotFound:
      error = ENOENT;  // OSError(ENOENT, ...) is a FileNotFoundError.
      break;
    case absl::StatusCode::kPermissionDenied:
      error = EACCES;  // PermissionError.
      break;
    case absl::StatusCode::kDeadlineExceeded:
      error = ETIMEDOUT;  // TimeoutError.
      break;
    case absl::StatusCode::kUnavailable:
      type = PyExc_ConnectionError;
      error = EAGAIN;
      break;
    case absl::StatusCode::kInvalidArgument: {
      PyObject* made = PyObject_CallOneArg(PyExc_ValueError, message.ptr());
      if (made == nullptr) throw py::error_already_set();
      return py::reinterpret_steal<py::object>(made);
    }
    default:
      break;
  }
  PyObject* made = PyObject_CallFunction(type, "iOO", error, message.ptr(), name.ptr());
  if (made == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(made);
}

[[noreturn]] void Raise(const absl::Status& status, const py::object& name) {
  py::object exception = ExceptionFor(status, name);
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exception.ptr())), exception.ptr());
  throw py::error_already_set();
}

template <typename T>
T ValueOrRaise(absl::StatusOr<T> value, const py::object& name) {
  if (!value.ok()) Raise(value.status(), name);
  return *std::move(value);
}

// A contiguous, writable buffer of a Python object (bytearray, memoryview,
// NumPy array, pinned tensor), held while it is written to.
class WritableBuffer {
 public:
  explicit WritableBuffer(const py::object& object) {
    if (PyObject_GetBuffer(object.ptr(), &view_, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) != 0) {
      throw py::error_already_set();
    }
  }
  ~WritableBuffer() { PyBuffer_Release(&view_); }
  WritableBuffer(const WritableBuffer&) = delete;
  WritableBuffer& operator=(const WritableBuffer&) = delete;

  std::span<char> span() { return {static_cast<char*>(view_.buf), static_cast<size_t>(view_.len)}; }

 private:
  Py_buffer view_;
};

// A new bytes object of `size` bytes, not filled yet: it is written to
// before any other code sees it.
py::bytes UnfilledBytes(uint64_t size) {
  PyObject* bytes = PyBytes_FromStringAndSize(nullptr, static_cast<Py_ssize_t>(size));
  if (bytes == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::bytes>(bytes);
}

class File {
 public:
  File(std::unique_ptr<GranaryFile> file, py::str name)
      : file_(std::move(file)), name_(std::move(name)) {}

  uint64_t size() const { return file_->size(); }

  size_t ReadAt(uint64_t offset, const py::object& buffer) {
    WritableBuffer out(buffer);
    absl::StatusOr<size_t> read;
    {
      py::gil_scoped_release unlocked;
      read = file_->ReadAt(offset, out.span());
    }
    return ValueOrRaise(std::move(read), name_);
  }

  py::bytes Read(uint64_t offset, uint64_t size) {
    const uint64_t left = offset < file_->size() ? file_->size() - offset : 0;
    py::bytes bytes = UnfilledBytes(std::min(size, left));
    std::span<char> out(PyBytes_AS_STRING(bytes.ptr()), PyBytes_GET_SIZE(bytes.ptr()));
    absl::StatusOr<size_t> read;
    {
      py::gil_scoped_release unlocked;
      read = file_->ReadAt(offset, out);
    }
    // ReadAt fills `out` whole: it ends short only at the end of the file.
    ValueOrRaise(std::move(read), name_);
    return bytes;
  }

 private:
  const std::unique_ptr<GranaryFile> file_;
  const py::str name_;
};

class Client {
 public:
  Client(const std::string& socket, bool read_through)
      : client_(ValueOrRaise(
            GranaryClient::Connect({.socket_path = socket, .read_through = read_through}),
            Utf8(socket))) {}

  py::list ReadMany(const std::string& dataset, const std::vector<std::string>& paths,
                    std::string_view errors, uint64_t version) {
    if (errors != "raise" && errors != "return") {
      throw py::value_error("errors must be 'raise' or 'return'");
    }
    const bool raise = errors == "raise";
    absl::StatusOr<GranaryClient::OpenedBatch> opened;
    {
      py::gil_scoped_release unlocked;
      opened = client_->OpenMany(dataset, paths, version);
    }
    GranaryClient::OpenedBatch batch = ValueOrRaise(std::move(opened), Utf8(dataset));
    std::vector<py::object> results(batch.files.size());
    std::vector<char*> outs(batch.files.size(), nullptr);
    for (size_t i = 0; i < batch.files.size(); ++i) {
      const GranaryClient::OpenedFile& file = batch.files[i];
      if (!file.status.ok()) {
        // Before any byte is read: a batch that is to raise reads nothing.
        if (raise) Raise(file.status, Utf8(paths[i]));
        continue;
      }
      py::bytes bytes = UnfilledBytes(file.size);
      outs[i] = PyBytes_AS_STRING(bytes.ptr());
      results[i] = std::move(bytes);
    }
    {
      py::gil_scoped_release unlocked;
      client_->ReadOpened(batch, outs);
    }
    py::list read(batch.files.size());
    for (size_t i = 0; i < batch.files.size(); ++i) {
      const absl::Status& status = batch.files[i].status;
      if (!status.ok()) {
        if (raise) Raise(status, Utf8(paths[i]));
        results[i] = ExceptionFor(status, Utf8(paths[i]));
      }
      read[i] = std::move(results[i]);
    }
    return read;
  }

  std::unique_ptr<File> OpenFile(const std::string& dataset, const std::string& path,
                                 uint64_t version) {
    absl::StatusOr<std::unique_ptr<GranaryFile>> file;
    {
      py::gil_scoped_release unlocked;
      file = client_->Open(dataset, path, version);
    }
    py::str name = Utf8(path);
    return std::make_unique<File>(ValueOrRaise(std::move(file), name), name);
  }

  py::list Datasets() {
    absl::StatusOr<std::vector<v1::DatasetInfo>> datasets;
    {
      py::gil_scoped_release unlocked;
      datasets = client_->Datasets();
    }
    py::list names;
    for (const v1::DatasetInfo& info : ValueOrRaise(std::move(datasets), py::none())) {
      names.append(Utf8(info.name()));
    }
    return names;
  }

  py::list List(const std::string& dataset, uint64_t version) {
    absl::StatusOr<DatasetSnapshot> snapshot;
    {
      py::gil_scoped_release unlocked;
      snapshot = client_->Manifest(dataset, version);
    }
    const Manifest& manifest = ValueOrRaise(std::move(snapshot), Utf8(dataset)).manifest;
    // One string object per type, shared by every row.
    const py::str file("file"), directory("directory"), symlink("symlink"), other("other");
    py::list rows(manifest.entries().size());
    size_t row = 0;
    for (const ManifestEntry& entry : manifest.entries()) {
      const py::str* type = &other;
      switch (entry.type) {
        case EntryType::kFile:
          type = &file;
          break;
        case EntryType::kDirectory:
          type = &directory;
          break;
        case EntryType::kSymlink:
          type = &symlink;
          break;
      }
      rows[row++] = py::make_tuple(Utf8(entry.path), entry.size, *type, entry.mode, entry.mtime_ns);
    }
    return rows;
  }

 private:
  const std::unique_ptr<GranaryClient> client_;
};

void DefineModule(py::module_& granary_module) {
  // A batch is many large bytes objects alive at once and freed together:
  // the next batch reuses their memory rather than faulting it in again.
  KeepLargeBuffersInTheHeap();
  granary_module.doc() = "libgranary for the Python package granary (use granary.Client).";
  granary_module.attr("__version__") = GRANARY_VERSION;

  py::class_<File>(granary_module, "File")
      .def_property_readonly("size", &File::size)
      .def("read_at", &File::ReadAt, py::arg("offset"), py::arg("buffer"),
           "Reads into a writable buffer at offset; returns the bytes read (fewer only at the "
           "end of the file, 0 past it).")
      .def("read", &File::Read, py::arg("offset"), py::arg("size"),
           "Up to size bytes at offset (fewer only at the end of the file).");

  py::class_<Client>(granary_module, "Client")
      .def(py::init<const std::string&, bool>(), py::arg("socket") = "",
           py::arg("read_through") = true)
      .def("read_many", &Client::ReadMany, py::arg("dataset"), py::arg("paths"),
           py::arg("errors") = "raise", py::arg("version") = 0,
           "Each file's bytes, in order. errors='return' puts a failed file's exception in "
           "its place instead of raising it.")
      .def("open_file", &Client::OpenFile, py::arg("dataset"), py::arg("path"),
           py::arg("version") = 0, py::keep_alive<0, 1>())
      .def("datasets", &Client::Datasets)
      .def("list", &Client::List, py::arg("dataset"), py::arg("version") = 0,
           "The dataset's entries, sorted by path, the root ('') first: "
           "(path, size, type, mode, mtime_ns) with type 'file', 'directory' or 'symlink'.");
}

}  // namespace
}  // namespace granary

PYBIND11_MODULE(_granary, granary_module) { granary::DefineModule(granary_module); }
