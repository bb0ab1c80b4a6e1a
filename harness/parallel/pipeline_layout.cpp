#include "harness/parallel/pipeline_layout.hpp"

#include <cctype>

#include "harness/core/error.hpp"

namespace moebench {

namespace {

constexpr const char* kSyntax =
    "the syntax is Megatron-Core's pipeline_model_parallel_layout: E (embedding), t (decoder "
    "layer), m (MTP layer), L (loss), '|' between stages, X*N and (...)*N repeat, e.g. "
    "\"Et*4|(t*4|)*14tmL\"";

// Expands repetitions into a flat string of E, t, m, L and '|'.
class Expander {
 public:
  explicit Expander(const std::string& text) : text_(text) {}

  std::string expand_all() {
    std::string out = sequence();
    if (pos_ != text_.size()) fail("unmatched ')'");
    return out;
  }

 private:
  // The text quoted whole where it is short, else its first characters: the line stays one line
  // a person reads, whatever was given.
  [[noreturn]] void fail(const std::string& what) const {
    const std::string shown =
        text_.size() <= kQuoted
            ? text_
            : text_.substr(0, kQuoted) + "... (" + std::to_string(text_.size()) + " characters)";
    throw UsageError("--pipeline-layout \"" + shown + "\": " + what + " at position " +
                     std::to_string(pos_ + 1) + "; " + kSyntax);
  }
  void skip() {
    while (pos_ < text_.size() &&
           (text_[pos_] == ',' || std::isspace(static_cast<unsigned char>(text_[pos_])))) {
      ++pos_;
    }
  }
  int count() {
    skip();
    if (pos_ >= text_.size() || text_[pos_] != '*') return 1;
    ++pos_;
    skip();
    const std::size_t start = pos_;
    long n = 0;
    while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
      n = n * 10 + (text_[pos_] - '0');
      if (n > 100000) fail("a repetition count above 100000");
      ++pos_;
    }
    if (pos_ == start) fail("'*' without a count");
    return static_cast<int>(n);
  }
  std::string sequence() {
    std::string out;
    for (;;) {
      skip();
      if (pos_ >= text_.size() || text_[pos_] == ')') return out;
      const char ch = text_[pos_];
      std::string unit;
      if (ch == '(') {
        // A bounded depth: the parser recurses once a level, and the stack is not unbounded.
        if (++depth_ > kMaxDepth) fail("more than " + std::to_string(kMaxDepth) + " nested '('");
        ++pos_;
        unit = sequence();
        if (pos_ >= text_.size()) fail("'(' without ')'");
        ++pos_;
        --depth_;
      } else if (ch == 'E' || ch == 't' || ch == 'm' || ch == 'L' || ch == '|') {
        unit = std::string(1, ch);
        ++pos_;
      } else {
        fail(std::string("unknown symbol '") + ch + "'");
      }
      const int n = count();
      // Checked before the copies are made: ((t*1000)*1000)*1000 is refused, not allocated.
      if (out.size() + unit.size() * static_cast<std::size_t>(n) > kMaxExpansion) {
        fail("an expansion longer than 10^6 symbols");
      }
      for (int i = 0; i < n; ++i) out += unit;
    }
  }

  static constexpr std::size_t kQuoted = 60;
  static constexpr int kMaxDepth = 64;
  static constexpr std::size_t kMaxExpansion = 1000000;
  const std::string& text_;
  std::size_t pos_ = 0;
  int depth_ = 0;
};

std::string repeat_text(char c, int n) {
  if (n == 0) return "";
  if (n == 1) return std::string(1, c);
  return std::string(1, c) + "*" + std::to_string(n);
}

std::string stage_text(const PipelineStage& s) {
  return std::string(s.embedding ? "E" : "") + repeat_text('t', s.layers) +
         repeat_text('m', s.mtp) + (s.loss ? "L" : "");
}

}  // namespace

int PipelineLayout::decoder_layers() const {
  int n = 0;
  for (const PipelineStage& s : stages) n += s.layers;
  return n;
}
int PipelineLayout::mtp_layers() const {
  int n = 0;
  for (const PipelineStage& s : stages) n += s.mtp;
  return n;
}
bool PipelineLayout::has_embedding() const {
  return !stages.empty() && stages.front().embedding;
}
bool PipelineLayout::has_loss() const {
  return !stages.empty() && stages.back().loss;
}

std::vector<int> PipelineLayout::layers_of_rank(int pp_rank) const {
  MB_CHECK(pp_rank >= 0 && pp_rank < pp, "pipeline rank " << pp_rank << " of " << pp);
  std::vector<int> out;
  for (int c = 0; c < vp; ++c) {
    const PipelineStage& s = stage(pp_rank, c);
    for (int l = 0; l < s.layers; ++l) out.push_back(s.first_layer + l);
  }
  return out;
}

std::string layout_text(const std::vector<PipelineStage>& stages) {
  // Runs of equal middle stages become (..|)*N.
  std::string out;
  std::size_t i = 0;
  while (i < stages.size()) {
    const std::string t = stage_text(stages[i]);
    std::size_t j = i + 1;
    while (j < stages.size() && stage_text(stages[j]) == t) ++j;
    const bool last_run = j == stages.size();
    const std::size_t n = j - i - (last_run ? 1 : 0);  // the final stage has no '|' after it
    if (n >= 2) {
      out += "(" + t + "|)*" + std::to_string(n);
    } else {
      for (std::size_t k = 0; k < n; ++k) out += t + "|";
    }
    if (last_run) out += t;
    i = j;
  }
  return out;
}

PipelineLayout parse_pipeline_layout(const std::string& text, int pp) {
  const std::string flat = Expander(text).expand_all();
  PipelineLayout layout;
  layout.pp = pp;
  layout.text = text;
  layout.stages.emplace_back();
  int layer = 0;
  bool seen_mtp = false;
  for (std::size_t i = 0; i < flat.size(); ++i) {
    PipelineStage& s = layout.stages.back();
    const char ch = flat[i];
    const auto bad = [&](const std::string& rule) {
      throw UsageError("--pipeline-layout \"" + text + "\": " + rule + "; " + kSyntax);
    };
    if (s.loss) {
      bad(ch == '|' ? "L (the loss) must be in the last stage"
                    : "nothing may follow L (the loss ends the last stage)");
    }
    switch (ch) {
      case '|':
        layout.stages.emplace_back();
        layout.stages.back().first_layer = layer;
        break;
      case 'E':
        if (layout.stages.size() != 1 || s.layers > 0 || s.mtp > 0 || s.embedding) {
          bad("E (the embedding) must come once, first in the first stage");
        }
        s.embedding = true;
        break;
      case 't':
        if (seen_mtp) bad("every t (decoder layer) must come before the m (MTP) layers");
        if (s.layers == 0) s.first_layer = layer;
        ++s.layers;
        ++layer;
        break;
      case 'm':
        seen_mtp = true;
        ++s.mtp;
        break;
      case 'L':
        s.loss = true;
        break;
      default:
        break;
    }
  }
  for (std::size_t i = 0; i + 1 < layout.stages.size(); ++i) {
    if (layout.stages[i].loss) {
      throw UsageError("--pipeline-layout \"" + text +
                       "\": L (the loss) must be in the last stage; " + kSyntax);
    }
  }
  const int stages = static_cast<int>(layout.stages.size());
  if (pp < 1 || stages % pp != 0) {
    throw UsageError("--pipeline-layout \"" + text + "\" has " + std::to_string(stages) +
                     " stages, not a multiple of --pp " + std::to_string(pp) +
                     "; it needs pp x vp stages separated by '|' (stage s is chunk s / pp of "
                     "pipeline rank s % pp)");
  }
  layout.vp = stages / pp;
  return layout;
}

PipelineLayout even_pipeline_layout(int layers, int pp, int vp, bool ends, int mtp) {
  const int stages = pp * vp;
  if (stages < 1 || layers % stages != 0) {
    std::string valid;
    for (int n = stages; n <= layers; n += stages) {
      if (!valid.empty()) valid += ", ";
      valid += std::to_string(n);
      if (valid.size() > 60) {
        valid += ", ...";
        break;
      }
    }
    throw UsageError(std::to_string(layers) + " decoder layers do not split evenly over pp " +
                     std::to_string(pp) + " x vp " + std::to_string(vp) + " = " +
                     std::to_string(stages) + " stages; valid --layers: " +
                     (valid.empty() ? "none up to " + std::to_string(layers) : valid) +
                     ", or give an uneven --pipeline-layout (e.g. \"Et|tt|tL\")");
  }
  PipelineLayout layout;
  layout.pp = pp;
  layout.vp = vp;
  const int per = layers / stages;
  for (int s = 0; s < stages; ++s) {
    PipelineStage st;
    st.first_layer = s * per;
    st.layers = per;
    st.embedding = ends && s == 0;
    st.loss = ends && s == stages - 1;
    st.mtp = s == stages - 1 ? mtp : 0;
    layout.stages.push_back(st);
  }
  layout.text = layout_text(layout.stages);
  return layout;
}

}  // namespace moebench
