// A plain-text table with aligned columns, as the CLI prints listings:
//
//   NAME      FILES  SIZE
//   imagenet  1281   140.2 GiB
//
// Columns are separated by two spaces; numbers read best right-aligned, so each
// column chooses its alignment. Lines carry no trailing spaces.
//
// Thread-safety: none; a value type used by one thread.
#ifndef GRANARY_CLI_TABLE_H_
#define GRANARY_CLI_TABLE_H_

#include <string>
#include <vector>

namespace granary::cli {

class Table {
 public:
  enum class Align { kLeft, kRight };
  struct Column {
    std::string header;
    Align align = Align::kLeft;
  };

  explicit Table(std::vector<Column> columns);

  // `cells` must have one entry per column.
  void AddRow(std::vector<std::string> cells);

  // The header line and every row, each ending in '\n'.
  std::string Render() const;

 private:
  std::vector<Column> columns_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace granary::cli

#endif  // GRANARY_CLI_TABLE_H_
