#include "cli/table.h"

#include <algorithm>
#include <cassert>
#include <utility>

namespace granary::cli {
namespace {

void AppendCell(const std::string& text, size_t width, Table::Align align, bool last,
                std::string& line) {
  size_t padding = width - text.size();
  if (align == Table::Align::kRight) line.append(padding, ' ');
  line += text;
  if (align == Table::Align::kLeft && !last) line.append(padding, ' ');
}

}  // namespace

Table::Table(std::vector<Column> columns) : columns_(std::move(columns)) {}

void Table::AddRow(std::vector<std::string> cells) {
  assert(cells.size() == columns_.size());
  rows_.push_back(std::move(cells));
}

std::string Table::Render() const {
  std::vector<size_t> widths;
  for (const Column& column : columns_) widths.push_back(column.header.size());
  for (const auto& row : rows_) {
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  }
  std::string out;
  auto append_line = [&](auto cell_text) {
    std::string line;
    for (size_t i = 0; i < columns_.size(); ++i) {
      if (i > 0) line += "  ";
      AppendCell(cell_text(i), widths[i], columns_[i].align, i + 1 == columns_.size(), line);
    }
    out += line;
    out += '\n';
  };
  append_line([&](size_t i) -> const std::string& { return columns_[i].header; });
  for (const auto& row : rows_) {
    append_line([&](size_t i) -> const std::string& { return row[i]; });
  }
  return out;
}

}  // namespace granary::cli
