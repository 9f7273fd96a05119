// The C++ settings parser: run-time switches of the kernel paths (CAUSAL_CONV1D_*_FAST,
// CAUSAL_CONV1D_CPU_HUGE_PAGES), shared by the CPU kernels and the CUDA kernel files (no torch here,
// so the .cu files stay quick to compile and the same in both op-layer builds).
//
// The rules are those of the Python side's causal_conv1d_contract.env_flag: TRUE/FALSE, 1/0,
// ON/OFF, YES/NO, case-insensitive, surrounding white space ignored; unset or empty = the default;
// anything else is an error naming the variable: a std::invalid_argument with the message of the
// Python side's InvalidSetting. torch up to 2.14 raises it as a ValueError; torch 2.15 as a
// RuntimeError, which the Python API (causal_conv1d/_errors.py) turns back into the ValueError.
#pragma once

#include <cctype>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>

namespace causal_conv1d {

// The value of the boolean setting `name`, or nullopt when unset or empty; throws on anything else.
inline std::optional<bool> env_flag(const char* name) {
  const char* env = std::getenv(name);
  if (env == nullptr) return std::nullopt;
  std::string raw(env);
  const auto first = raw.find_first_not_of(" \t\r\n\f\v");
  if (first == std::string::npos) return std::nullopt;
  raw = raw.substr(first, raw.find_last_not_of(" \t\r\n\f\v") - first + 1);
  std::string up;
  for (char c : raw) up += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (up == "1" || up == "TRUE" || up == "ON" || up == "YES") return true;
  if (up == "0" || up == "FALSE" || up == "OFF" || up == "NO") return false;
  throw std::invalid_argument(std::string("Invalid value for ") + name +
                              " (expected TRUE or FALSE): '" + raw + "'");
}

// Whether a switch that is on by default is on. Callers cache the answer in a function-local static
// (read once per process; an invalid value throws at each use until it is fixed, since a static
// whose initialiser throws stays uninitialised).
inline bool switch_on(const char* name) { return env_flag(name).value_or(true); }

}  // namespace causal_conv1d
