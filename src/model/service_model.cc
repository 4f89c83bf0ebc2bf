#include "hyperfleet/model/service_model.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "hyperfleet/common/strings.h"
#include "model/embedded_model.h"
#include "model/value_text.h"


namespace hf::model {
namespace {

using nlohmann::json;

// Inputs are attacker-controlled; these keep the work and the messages bounded.
constexpr int kMaxDepth = 64;                 // nesting of the model's shapes in one request
constexpr size_t kMaxValueChars = 256;        // code points of a value printed in a message
constexpr size_t kMaxListedViolations = 100;  // violations spelled out in one message
// Some model patterns backtrack polynomially; a string already far over its max length gets
// only the length violation, and every match is capped in steps (a capped match fails).
constexpr size_t kMaxPatternSubject = 4096;  // code points
constexpr uint32_t kMatchLimit = 1'000'000;

Status InvalidArgument(std::string_view message) {
  return absl::InvalidArgumentError(AbslView(message));
}

// A compiled model pattern. Full match: anchored at both ends, as AWS (Java) matches them.
class Regex {
 public:
  static StatusOr<std::unique_ptr<Regex>> Compile(const std::string& pattern) {
    pcre2_compile_context* context = pcre2_compile_context_create(nullptr);
    if (context == nullptr) return absl::ResourceExhaustedError("pcre2 compile context");
    // Java's '.' stops at any line terminator, not only '\n'.
    pcre2_set_newline(context, PCRE2_NEWLINE_ANY);
    int error = 0;
    PCRE2_SIZE offset = 0;
    // UTF so that \p{L} etc. see code points. Not UCP: Java's \d \s \w \b are ASCII-only by
    // default, and the model's patterns (e.g. `\d{12}` in RoleArn) are written for that.
    pcre2_code* code =
        pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                      PCRE2_UTF | PCRE2_ANCHORED | PCRE2_ENDANCHORED, &error, &offset, context);
    pcre2_compile_context_free(context);
    if (code == nullptr) {
      PCRE2_UCHAR buffer[256];
      pcre2_get_error_message(error, buffer, sizeof(buffer));
      return InvalidArgument("pattern '" + pattern + "' does not compile at offset " +
                             std::to_string(offset) + ": " + reinterpret_cast<const char*>(buffer));
    }
    // JIT is an optimisation only; the interpreter is used when it is unavailable.
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
    return std::unique_ptr<Regex>(new Regex(code));
  }

  ~Regex() { pcre2_code_free(code_); }
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  /// True when all of `subject` matches. Invalid UTF-8 never matches.
  bool FullMatch(std::string_view subject) const {
    // Match data is per thread: the compiled code is shared by every thread.
    thread_local MatchData match_data;
    if (match_data.get() == nullptr) return false;
    const char* data = subject.empty() ? "" : subject.data();
    auto sptr = reinterpret_cast<PCRE2_SPTR>(data);
    pcre2_match_context* context = MatchContext();
    int rc = pcre2_match(code_, sptr, subject.size(), 0, 0, match_data.get(), context);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
      rc = pcre2_match(code_, sptr, subject.size(), 0, PCRE2_NO_JIT, match_data.get(), context);
    }
    // rc == 0 means "matched, ovector too small", which is still a match.
    return rc >= 0;
  }

 private:
  // Shared by all threads: pcre2_match only reads it.
  static pcre2_match_context* MatchContext() {
    static pcre2_match_context* context = [] {
      pcre2_match_context* c = pcre2_match_context_create(nullptr);
      if (c != nullptr) pcre2_set_match_limit(c, kMatchLimit);
      return c;
    }();
    return context;
  }

  // One pair is enough: only whether it matched is used.
  class MatchData {
   public:
    MatchData() : data_(pcre2_match_data_create(1, nullptr)) {}
    ~MatchData() { pcre2_match_data_free(data_); }
    MatchData(const MatchData&) = delete;
    MatchData& operator=(const MatchData&) = delete;
    pcre2_match_data* get() const { return data_; }

   private:
    pcre2_match_data* data_;
  };

  explicit Regex(pcre2_code* code) : code_(code) {}
  pcre2_code* code_;
};

enum class Kind {
  kStructure,
  kList,
  kMap,
  kString,
  kInteger,
  kLong,
  kFloat,
  kDouble,
  kBoolean,
  kTimestamp,
  kBlob,
  kOther,  // a type this validator does not know: accepted as is
};

Kind KindOf(std::string_view type) {
  static const std::map<std::string_view, Kind> kKinds = {
      {"structure", Kind::kStructure}, {"list", Kind::kList},       {"map", Kind::kMap},
      {"string", Kind::kString},       {"integer", Kind::kInteger}, {"long", Kind::kLong},
      {"float", Kind::kFloat},         {"double", Kind::kDouble},   {"boolean", Kind::kBoolean},
      {"timestamp", Kind::kTimestamp}, {"blob", Kind::kBlob},
  };
  auto it = kKinds.find(type);
  return it == kKinds.end() ? Kind::kOther : it->second;
}

struct Shape;

struct Member {
  std::string name;       // as on the wire, e.g. "InstanceGroups"
  std::string path_name;  // as in AWS messages, e.g. "instanceGroups"
  const Shape* shape = nullptr;
  bool required = false;
};

// A bound of a shape: compared as long double (exact for every int64), printed as written.
struct Bound {
  long double value = 0;
  std::string text;
};

struct Shape {
  std::string name;
  Kind kind = Kind::kOther;
  const json* raw = nullptr;
  bool is_union = false;
  bool sensitive = false;
  bool document = false;  // a free-form structure ("document": true): kept whole by Prune
  std::optional<Bound> min;
  std::optional<Bound> max;
  std::string pattern;
  const Regex* regex = nullptr;
  std::vector<std::string> enum_values;  // model order, for messages
  std::set<std::string, std::less<>> enum_set;
  std::vector<Member> members;
  const Shape* member = nullptr;  // list
  const Shape* key = nullptr;     // map
  const Shape* value = nullptr;   // map
};

// Timestamps given as strings: ISO-8601 (date, or date-time with optional fraction and zone)
// or epoch seconds written as a string.
const Regex& TimestampStringRegex() {
  static const Regex* regex = [] {
    auto compiled = Regex::Compile(
        "[0-9]{4}-[0-9]{2}-[0-9]{2}"
        "([Tt ][0-9]{2}:[0-9]{2}(:[0-9]{2}([.,][0-9]+)?)?([Zz]|[+-][0-9]{2}(:?[0-9]{2})?)?)?"
        "|-?[0-9]+([.][0-9]+)?");
    if (!compiled.ok()) std::abort();  // a constant pattern: cannot fail
    return compiled->release();
  }();
  return *regex;
}

// One validation pass over one request.
class Walker {
 public:
  void Check(const Shape& shape, const json& v, std::string& path, int depth);

  std::optional<std::string> serialization_error;
  std::vector<std::string> violations;
  size_t violation_count = 0;

 private:
  void TypeError(const std::string& path, std::string_view expected) {
    if (serialization_error) return;
    if (path.empty()) {
      serialization_error = "Expected a JSON " + std::string(expected) + " as the request body";
    } else {
      serialization_error = "Expected a JSON " + std::string(expected) + " at '" + path + "'";
    }
  }
  void Violation(const Shape& shape, const json* v, const std::string& path,
                 std::string_view constraint) {
    ++violation_count;
    if (violations.size() >= kMaxListedViolations) return;
    std::string text = "Value ";
    if (v == nullptr) {
      text += "null ";
    } else if (!shape.sensitive) {
      // Sensitive values are never echoed; AWS then writes "Value at '...'".
      text += "'" + RenderValue(*v, kMaxValueChars, kMaxDepth) + "' ";
    }
    text += "at '" + path + "' failed to satisfy constraint: ";
    text += constraint;
    violations.push_back(std::move(text));
  }
  void CheckLength(const Shape& shape, const json& v, size_t length, const std::string& path) {
    const auto n = static_cast<long double>(length);
    if (shape.min && n < shape.min->value) {
      Violation(shape, &v, path,
                "Member must have length greater than or equal to " + shape.min->text);
    }
    if (shape.max && n > shape.max->value) {
      Violation(shape, &v, path,
                "Member must have length less than or equal to " + shape.max->text);
    }
  }
  void CheckRange(const Shape& shape, const json& v, long double n, const std::string& path) {
    if (shape.min && n < shape.min->value) {
      Violation(shape, &v, path,
                "Member must have value greater than or equal to " + shape.min->text);
    }
    if (shape.max && n > shape.max->value) {
      Violation(shape, &v, path, "Member must have value less than or equal to " + shape.max->text);
    }
  }
  void CheckString(const Shape& shape, const json& v, const std::string& path);
  void CheckInteger(const Shape& shape, const json& v, const std::string& path);
  void CheckStructure(const Shape& shape, const json& v, std::string& path, int depth);
};

void Walker::CheckString(const Shape& shape, const json& v, const std::string& path) {
  const std::string& s = v.get_ref<const std::string&>();
  const size_t length = CodePoints(s);
  CheckLength(shape, v, length, path);
  const bool far_too_long = shape.max && static_cast<long double>(length) > shape.max->value &&
                            length > kMaxPatternSubject;
  if (shape.regex != nullptr && !far_too_long && !shape.regex->FullMatch(s)) {
    Violation(shape, &v, path, "Member must satisfy regular expression pattern: " + shape.pattern);
  }
  if (!shape.enum_values.empty() && shape.enum_set.find(s) == shape.enum_set.end()) {
    std::string set = "Member must satisfy enum value set: [";
    for (size_t i = 0; i < shape.enum_values.size(); ++i) {
      if (i > 0) set += ", ";
      set += shape.enum_values[i];
    }
    set += "]";
    Violation(shape, &v, path, set);
  }
}

void Walker::CheckInteger(const Shape& shape, const json& v, const std::string& path) {
  long double n = 0;
  if (v.is_number_unsigned()) {
    n = static_cast<long double>(v.get<std::uint64_t>());
  } else if (v.is_number_integer()) {
    n = static_cast<long double>(v.get<std::int64_t>());
  } else if (v.is_number_float()) {
    // An integral float (1.0, 1e2) is taken as an integer; a fraction is a type error.
    const double d = v.get<double>();
    if (!std::isfinite(d) || std::trunc(d) != d) return TypeError(path, "integer");
    n = static_cast<long double>(d);
  } else {
    return TypeError(path, "integer");
  }
  const bool is_int32 = shape.kind == Kind::kInteger;
  const long double lo = is_int32
                             ? std::numeric_limits<std::int32_t>::min()
                             : static_cast<long double>(std::numeric_limits<std::int64_t>::min());
  const long double hi = is_int32
                             ? std::numeric_limits<std::int32_t>::max()
                             : static_cast<long double>(std::numeric_limits<std::int64_t>::max());
  if (n < lo || n > hi) return TypeError(path, is_int32 ? "32-bit integer" : "64-bit integer");
  CheckRange(shape, v, n, path);
}

void Walker::CheckStructure(const Shape& shape, const json& v, std::string& path, int depth) {
  if (!v.is_object()) return TypeError(path, "object");
  const size_t base = path.size();
  size_t set_members = 0;
  for (const Member& member : shape.members) {
    if (serialization_error) return;
    auto it = v.find(member.name);
    const bool present = it != v.end() && !it->is_null();
    if (base > 0) path += '.';
    path += member.path_name;
    if (present) {
      ++set_members;
      Check(*member.shape, *it, path, depth + 1);
    } else if (member.required) {
      Violation(*member.shape, nullptr, path, "Member must not be null");
    }
    path.resize(base);
  }
  if (shape.is_union && set_members != 1 && !serialization_error) {
    Violation(shape, &v, path.empty() ? std::string("input") : path,
              "Member must have exactly one member set");
  }
}

void Walker::Check(const Shape& shape, const json& v, std::string& path, int depth) {
  if (serialization_error) return;
  if (depth > kMaxDepth) {
    serialization_error = "Input is nested too deeply at '" + path + "'";
    return;
  }
  switch (shape.kind) {
    case Kind::kStructure:
      return CheckStructure(shape, v, path, depth);
    case Kind::kList: {
      if (!v.is_array()) return TypeError(path, "array");
      CheckLength(shape, v, v.size(), path);
      if (shape.member == nullptr) return;
      const size_t base = path.size();
      size_t index = 0;
      for (const json& item : v) {
        if (serialization_error) return;
        path += '.';
        path += std::to_string(++index);
        path += ".member";
        if (item.is_null()) {
          Violation(*shape.member, nullptr, path, "Member must not be null");
        } else {
          Check(*shape.member, item, path, depth + 1);
        }
        path.resize(base);
      }
      return;
    }
    case Kind::kMap: {
      if (!v.is_object()) return TypeError(path, "object");
      CheckLength(shape, v, v.size(), path);
      const size_t base = path.size();
      for (auto it = v.begin(); it != v.end(); ++it) {
        if (serialization_error) return;
        // Key violations are reported at the map itself, with the key as the value.
        if (shape.key != nullptr && shape.key->kind == Kind::kString) {
          CheckString(*shape.key, json(it.key()), path);
        }
        if (base > 0) path += '.';
        path += it.key();
        if (shape.value != nullptr) {
          if (it.value().is_null()) {
            Violation(*shape.value, nullptr, path, "Member must not be null");
          } else {
            Check(*shape.value, it.value(), path, depth + 1);
          }
        }
        path.resize(base);
      }
      return;
    }
    case Kind::kString:
      if (!v.is_string()) return TypeError(path, "string");
      return CheckString(shape, v, path);
    case Kind::kInteger:
    case Kind::kLong:
      return CheckInteger(shape, v, path);
    case Kind::kFloat:
    case Kind::kDouble: {
      if (!v.is_number()) return TypeError(path, "number");
      const long double n = v.is_number_float() ? static_cast<long double>(v.get<double>())
                            : v.is_number_unsigned()
                                ? static_cast<long double>(v.get<std::uint64_t>())
                                : static_cast<long double>(v.get<std::int64_t>());
      return CheckRange(shape, v, n, path);
    }
    case Kind::kBoolean:
      if (!v.is_boolean()) return TypeError(path, "boolean");
      return;
    case Kind::kTimestamp:
      if (v.is_number()) return;
      if (v.is_string() && TimestampStringRegex().FullMatch(v.get_ref<const std::string&>()))
        return;
      return TypeError(path, "timestamp (epoch seconds or ISO-8601 string)");
    case Kind::kBlob:
      if (!v.is_string()) return TypeError(path, "string (base64 blob)");
      return;
    case Kind::kOther:
      return;
  }
}

// Keeps what `shape` defines of `v`, in place: members are erased and kept values moved,
// never copied (a ListClusterNodes page is thousands of values). Depth follows the model's
// shapes, not the input; a value of the wrong kind for a structure, list or map becomes an
// empty one.
void Prune(const Shape& shape, json& v) {
  switch (shape.kind) {
    case Kind::kStructure: {
      if (shape.document) return;
      if (!v.is_object()) {
        v = json::object();
        return;
      }
      for (auto it = v.begin(); it != v.end();) {
        const auto m = std::find_if(shape.members.begin(), shape.members.end(),
                                    [&](const Member& m) { return m.name == it.key(); });
        if (m == shape.members.end() || m->shape == nullptr || it->is_null()) {
          it = v.erase(it);
        } else {
          Prune(*m->shape, *it);
          ++it;
        }
      }
      return;
    }
    case Kind::kList:
      if (!v.is_array() || !shape.member) {
        v = json::array();
        return;
      }
      for (json& item : v) Prune(*shape.member, item);
      return;
    case Kind::kMap:
      if (!v.is_object() || !shape.value) {
        v = json::object();
        return;
      }
      for (auto it = v.begin(); it != v.end(); ++it) Prune(*shape.value, *it);
      return;
    default:
      return;
  }
}

class ModelImpl final : public ServiceModel {
 public:
  static StatusOr<std::shared_ptr<const ServiceModel>> Build(json doc);

  bool hasOperation(std::string_view name) const override {
    return operations_.find(name) != operations_.end();
  }

  std::vector<std::string> operations() const override {
    std::vector<std::string> names;
    names.reserve(operations_.size());
    for (const auto& [name, input] : operations_) names.push_back(name);
    return names;  // std::map keeps them sorted
  }

  const json* operation(std::string_view name) const override {
    auto it = raw_operations_.find(name);
    return it == raw_operations_.end() ? nullptr : it->second;
  }

  const json* shape(std::string_view name) const override {
    auto it = shapes_.find(name);
    return it == shapes_.end() ? nullptr : it->second.raw;
  }

  std::vector<std::string> enumValues(std::string_view name) const override {
    auto it = shapes_.find(name);
    return it == shapes_.end() ? std::vector<std::string>{} : it->second.enum_values;
  }

  Status validateInput(std::string_view operation, const json& input) const override {
    auto op = operations_.find(operation);
    if (op == operations_.end()) {
      return absl::NotFoundError(AbslView("unknown operation: " + std::string(operation)));
    }
    const Shape* root = op->second;
    if (root == nullptr) return Status();  // no input shape: any body is accepted
    Walker walker;
    std::string path;
    walker.Check(*root, input, path, 0);
    if (walker.serialization_error) {
      return WithAwsErrorType(InvalidArgument(*walker.serialization_error),
                              "SerializationException");
    }
    if (walker.violation_count == 0) return Status();
    std::string message = std::to_string(walker.violation_count) +
                          (walker.violation_count == 1 ? " validation error detected: "
                                                       : " validation errors detected: ");
    for (size_t i = 0; i < walker.violations.size(); ++i) {
      if (i > 0) message += "; ";
      message += walker.violations[i];
    }
    return InvalidArgument(message);
  }

  json pruneInput(std::string_view operation, json input) const override {
    auto op = operations_.find(operation);
    if (op == operations_.end() || op->second == nullptr) return json::object();
    Prune(*op->second, input);
    return input;
  }

  json pruneOutput(std::string_view operation, json output) const override {
    auto op = outputs_.find(operation);
    if (op == outputs_.end() || op->second == nullptr) return json::object();
    Prune(*op->second, output);
    return output;
  }

  std::string outputShape(std::string_view operation) const override {
    auto op = outputs_.find(operation);
    return op == outputs_.end() || op->second == nullptr ? std::string() : op->second->name;
  }

 private:
  Status Index();
  Status IndexShape(const std::string& name, const json& raw, Shape& shape);
  Status IndexMembers(const std::string& context, const json& raw, Shape& shape);
  StatusOr<const Shape*> Resolve(const json& ref, std::string_view context) const;

  json doc_;
  std::map<std::string, Shape, std::less<>> shapes_;  // node-based: Shape addresses are stable
  std::map<std::string, const Shape*, std::less<>> operations_;         // name -> input (or null)
  std::map<std::string, const Shape*, std::less<>> outputs_;            // name -> output (or null)
  std::map<std::string, const json*, std::less<>> raw_operations_;      // name -> its JSON
  std::map<std::string, std::unique_ptr<Regex>, std::less<>> regexes_;  // one per pattern
};

StatusOr<const Shape*> ModelImpl::Resolve(const json& ref, std::string_view context) const {
  if (!ref.is_object())
    return InvalidArgument("shape reference in " + std::string(context) + " is not an object");
  auto target = ref.find("shape");
  if (target == ref.end() || !target->is_string()) {
    return InvalidArgument("shape reference in " + std::string(context) + " has no \"shape\"");
  }
  auto it = shapes_.find(target->get_ref<const std::string&>());
  if (it == shapes_.end()) {
    return InvalidArgument("shape " + target->get<std::string>() + " referenced from " +
                           std::string(context) + " is not defined");
  }
  return &it->second;
}

StatusOr<Bound> ReadBound(const json& raw, const char* key, const std::string& shape) {
  auto it = raw.find(key);
  if (!it->is_number())
    return InvalidArgument("shape " + shape + ": \"" + key + "\" is not a number");
  Bound bound;
  if (it->is_number_unsigned()) {
    bound.value = static_cast<long double>(it->get<std::uint64_t>());
  } else if (it->is_number_integer()) {
    bound.value = static_cast<long double>(it->get<std::int64_t>());
  } else {
    bound.value = static_cast<long double>(it->get<double>());
  }
  bound.text = it->dump(-1, ' ', false, json::error_handler_t::replace);
  return bound;
}

Status ModelImpl::IndexMembers(const std::string& context, const json& raw, Shape& shape) {
  std::set<std::string, std::less<>> required;
  if (auto it = raw.find("required"); it != raw.end()) {
    if (!it->is_array()) return InvalidArgument(context + ": \"required\" is not a list");
    for (const json& r : *it) {
      if (!r.is_string()) return InvalidArgument(context + ": required name is not a string");
      required.insert(r.get<std::string>());
    }
  }
  auto members = raw.find("members");
  if (members == raw.end()) {
    if (!required.empty()) return InvalidArgument(context + ": required members without members");
    return Status();
  }
  if (!members->is_object()) return InvalidArgument(context + ": \"members\" is not an object");
  for (auto it = members->begin(); it != members->end(); ++it) {
    Member member;
    member.name = it.key();
    member.path_name = LowerCamel(it.key());
    HF_ASSIGN_OR_RETURN(member.shape, Resolve(it.value(), context + "." + it.key()));
    member.required = required.count(it.key()) > 0;
    shape.members.push_back(std::move(member));
  }
  for (const std::string& r : required) {
    if (!members->contains(r)) {
      return InvalidArgument(context + ": required member " + r + " is not a member");
    }
  }
  return Status();
}

Status ModelImpl::IndexShape(const std::string& name, const json& raw, Shape& shape) {
  auto type = raw.find("type");
  if (type == raw.end() || !type->is_string()) {
    return InvalidArgument("shape " + name + " has no \"type\"");
  }
  shape.kind = KindOf(type->get_ref<const std::string&>());
  auto flag = [&raw](const char* key) {
    auto it = raw.find(key);
    return it != raw.end() && it->is_boolean() && it->get<bool>();
  };
  shape.is_union = flag("union");
  shape.sensitive = flag("sensitive");
  shape.document = flag("document");
  if (raw.contains("min")) {
    HF_ASSIGN_OR_RETURN(shape.min, ReadBound(raw, "min", name));
  }
  if (raw.contains("max")) {
    HF_ASSIGN_OR_RETURN(shape.max, ReadBound(raw, "max", name));
  }
  if (auto it = raw.find("pattern"); it != raw.end()) {
    if (!it->is_string()) return InvalidArgument("shape " + name + ": \"pattern\" is not a string");
    shape.pattern = it->get<std::string>();
    auto compiled = regexes_.find(shape.pattern);
    if (compiled == regexes_.end()) {
      auto regex = Regex::Compile(shape.pattern);
      if (!regex.ok()) {
        return InvalidArgument("shape " + name + ": " + std::string(regex.status().message()));
      }
      compiled = regexes_.emplace(shape.pattern, *std::move(regex)).first;
    }
    shape.regex = compiled->second.get();
  }
  if (auto it = raw.find("enum"); it != raw.end()) {
    if (!it->is_array()) return InvalidArgument("shape " + name + ": \"enum\" is not a list");
    for (const json& value : *it) {
      if (!value.is_string())
        return InvalidArgument("shape " + name + ": enum value is not a string");
      shape.enum_values.push_back(value.get<std::string>());
      shape.enum_set.insert(value.get<std::string>());
    }
  }
  const std::string context = "shape " + name;
  if (shape.kind == Kind::kStructure) return IndexMembers(context, raw, shape);
  if (shape.kind == Kind::kList) {
    auto member = raw.find("member");
    if (member == raw.end()) return InvalidArgument(context + ": list without \"member\"");
    HF_ASSIGN_OR_RETURN(shape.member, Resolve(*member, context + ".member"));
  } else if (shape.kind == Kind::kMap) {
    auto key = raw.find("key");
    auto value = raw.find("value");
    if (key == raw.end() || value == raw.end()) {
      return InvalidArgument(context + ": map without \"key\" or \"value\"");
    }
    HF_ASSIGN_OR_RETURN(shape.key, Resolve(*key, context + ".key"));
    HF_ASSIGN_OR_RETURN(shape.value, Resolve(*value, context + ".value"));
  }
  return Status();
}

Status ModelImpl::Index() {
  if (!doc_.is_object()) return InvalidArgument("service model is not a JSON object");
  auto shapes = doc_.find("shapes");
  auto operations = doc_.find("operations");
  if (shapes == doc_.end() || !shapes->is_object()) {
    return InvalidArgument("service model has no \"shapes\" object");
  }
  if (operations == doc_.end() || !operations->is_object()) {
    return InvalidArgument("service model has no \"operations\" object");
  }
  // Two passes: create every shape first so that references can point at any of them.
  for (auto it = shapes->begin(); it != shapes->end(); ++it) {
    if (!it.value().is_object()) return InvalidArgument("shape " + it.key() + " is not an object");
    Shape& shape = shapes_[it.key()];
    shape.name = it.key();
    shape.raw = &it.value();
  }
  for (auto& [name, shape] : shapes_) {
    HF_RETURN_IF_ERROR(IndexShape(name, *shape.raw, shape));
  }
  for (auto it = operations->begin(); it != operations->end(); ++it) {
    if (!it.value().is_object())
      return InvalidArgument("operation " + it.key() + " is not an object");
    const Shape* input = nullptr;
    if (auto in = it.value().find("input"); in != it.value().end()) {
      HF_ASSIGN_OR_RETURN(input, Resolve(*in, "operation " + it.key() + " input"));
    }
    const Shape* output = nullptr;
    if (auto out = it.value().find("output"); out != it.value().end()) {
      HF_ASSIGN_OR_RETURN(output, Resolve(*out, "operation " + it.key() + " output"));
    }
    if (auto errors = it.value().find("errors"); errors != it.value().end()) {
      if (!errors->is_array())
        return InvalidArgument("operation " + it.key() + ": errors is not a list");
      for (const json& ref : *errors) {
        HF_RETURN_IF_ERROR(Resolve(ref, "operation " + it.key() + " errors").status());
      }
    }
    operations_[it.key()] = input;
    outputs_[it.key()] = output;
    raw_operations_[it.key()] = &it.value();
  }
  return Status();
}

StatusOr<std::shared_ptr<const ServiceModel>> ModelImpl::Build(json doc) {
  auto model = std::make_shared<ModelImpl>();
  model->doc_ = std::move(doc);
  HF_RETURN_IF_ERROR(model->Index());
  return std::shared_ptr<const ServiceModel>(std::move(model));
}

}  // namespace

StatusOr<std::shared_ptr<const ServiceModel>> ServiceModel::FromJson(
    std::string_view service_json) {
  json doc = json::parse(service_json.begin(), service_json.end(), nullptr,
                         /*allow_exceptions=*/false);
  if (doc.is_discarded()) return InvalidArgument("service model is not valid JSON");
  return ModelImpl::Build(std::move(doc));
}

namespace {

std::shared_ptr<const ServiceModel> ParseEmbedded(std::string_view text) {
  auto parsed = ServiceModel::FromJson(text);
  if (!parsed.ok()) {
    // The embedded model is fixed at build time and covered by tests; this is a build bug.
    std::fprintf(stderr, "embedded service model is invalid: %s\n",
                 std::string(parsed.status().message()).c_str());
    std::abort();
  }
  return *std::move(parsed);
}

}  // namespace

std::shared_ptr<const ServiceModel> ServiceModel::Embedded() {
  static const std::shared_ptr<const ServiceModel> model =
      ParseEmbedded(hf::data::kSageMakerServiceModel);
  return model;
}

std::shared_ptr<const ServiceModel> ServiceModel::EmbeddedEks() {
  static const std::shared_ptr<const ServiceModel> model =
      ParseEmbedded(hf::data::kEksServiceModel);
  return model;
}

}  // namespace hf::model
