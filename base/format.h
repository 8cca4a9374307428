// ShortNumber: a double as `std::ostream` prints it with the given number of
// significant digits ("2.5e+10", "0.6612"), for notes and messages. Pure.
#pragma once

#include <sstream>
#include <string>

namespace dt {

inline std::string ShortNumber(double v, int significant_digits = 4) {
  std::ostringstream os;
  os.precision(significant_digits);
  os << v;
  return os.str();
}

}  // namespace dt
