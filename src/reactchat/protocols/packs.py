"""Prompt packs: the words of the ReAct prompt in English, French and Japanese."""

from __future__ import annotations

from dataclasses import dataclass, field

from reactchat.messages import ReactLabels


@dataclass(frozen=True, eq=False)  # hashed by identity, for the label cache
class PromptPack:
    """The words of the ReAct prompt in one language."""

    language: str
    labels: ReactLabels
    instructions: str
    history_header: str
    question: str
    user: str
    assistant: str
    no_history: str
    #: extra spellings the parser accepts for each label
    aliases: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: corrections shown to the model, by kind of format error
    corrections: dict[str, str] = field(default_factory=dict)
    budget_note: str = ""
    #: one full cycle with a tool the agent does not have, in the pack's labels (``{thought}``
    #: etc.), shown before "Begin!" when few-shot prompting is on
    example: str = ""
    #: compaction (``reactchat.engine.compaction``): the summariser's instructions, its
    #: request (``{summary}``: the summary so far, ``{conversation}``: what to add to it),
    #: and the headers a prompt introduces a summary of earlier turns or steps with
    summary_system: str = ""
    summary_request: str = ""
    summary_header: str = ""
    steps_header: str = ""
    #: what introduces the earlier turns a summary covers that match the new message
    recalled_header: str = ""

    def example_block(self) -> str:
        """The example with this pack's labels, ready for the instructions."""
        return self.example.format(**self.labels.model_dump()) + "\n\n" if self.example else ""


_EN_INSTRUCTIONS = """\
Answer the following question as best you can. You have access to the following tools:

{tools}

Use the following format:

Question: the input question you must answer
{thought}: you should always think about what to do
{action}: the action to take, must be one of [{tool_names}]
{action_input}: the input to the action, a JSON object matching the tool's input schema
{observation}: the result of the action
... (this {thought}/{action}/{action_input}/{observation} can repeat N times)
{thought}: I now know the final answer
{final_answer}: the final answer to the original input question

Write one {action} at a time and stop after its {action_input}: the {observation} will be \
given to you. If a fact that only the user knows is missing, use ask_user.

{example}Begin!"""

# The examples use a tool no agent has (tide times in a port far from any task) and end
# with an answer that restates the observation: small models copy an example's shape,
# and they should copy that, not its words. The first thought names nothing of the task:
# Gemma 270M copies it word for word, and "I need the tide table for Brest." led it to
# look arithmetic up on the web (fetch_url) instead of using the calculator.
_EN_EXAMPLE = """\
An example of one full cycle (its tool, tide_times, is only an example: you do not have it):

Question: When is high tide in Brest today?
{thought}: I will use a tool to find this.
{action}: tide_times
{action_input}: {{"port": "Brest"}}
{observation}: High tide in Brest today: 06:12 and 18:37.
{thought}: The observation answers the question.
{final_answer}: High tide in Brest is at 06:12 and 18:37 today."""

EN_CORRECTIONS = {
    "no_label": (
        "Invalid format: your reply has no '{thought}:', '{action}:' or '{final_answer}:' line. "
        "Reply with '{thought}: ...' followed by either '{action}: <one of [{tool_names}]>' and "
        "'{action_input}: <JSON object>', or '{final_answer}: <answer>'."
    ),
    "no_decision": (
        "Invalid format: you wrote a {thought} but neither an {action} nor a {final_answer}. "
        "Continue with '{action}: <one of [{tool_names}]>' and '{action_input}: <JSON object>', "
        "or with '{final_answer}: <answer>'."
    ),
    "no_tool": "Invalid format: '{action}:' must be followed by a tool name, one of [{tool_names}].",
    "no_input": (
        "Invalid format: '{action}: {tool}' must be followed by a line '{action_input}: <JSON object>' "
        "(use {{}} if the tool takes no input)."
    ),
    "empty_answer": "Invalid format: '{final_answer}:' must be followed by the answer itself.",
}

PACKS: dict[str, PromptPack] = {
    "en": PromptPack(
        language="en",
        labels=ReactLabels(),
        instructions=_EN_INSTRUCTIONS,
        history_header="Conversation so far:",
        question="Question",
        user="User",
        assistant="Assistant",
        no_history="",
        corrections=EN_CORRECTIONS,
        budget_note=(
            "The step budget is used up: no more actions. Write your best final answer from the "
            "observations above, and say what is uncertain."
        ),
        example=_EN_EXAMPLE,
        summary_system=("You summarise a conversation so that it can go on without its full text."),
        summary_request=(
            "Summary so far:\n{summary}\n\nWhat came after it:\n{conversation}\n\n"
            "Write one updated summary of everything above: the facts, the decisions, the open "
            "questions and what the user asked for. Copy every number, name and date exactly. "
            "Write only the summary."
        ),
        summary_header="Summary of the earlier conversation:",
        steps_header="Summary of the earlier steps",
        recalled_header="Earlier turns that bear on the question:",
    ),
    "fr": PromptPack(
        language="fr",
        labels=ReactLabels(
            thought="Pensée",
            action="Action",
            action_input="Entrée de l'action",
            observation="Observation",
            final_answer="Réponse finale",
        ),
        instructions="""\
Répondez à la question suivante du mieux que vous pouvez. Vous avez accès aux outils suivants :

{tools}

Utilisez le format suivant :

Question : la question à laquelle vous devez répondre
{thought}: réfléchissez toujours à ce que vous allez faire
{action}: l'action à entreprendre, qui doit être l'une de [{tool_names}]
{action_input}: l'entrée de l'action, un objet JSON conforme au schéma de l'outil
{observation}: le résultat de l'action
... (ce cycle {thought}/{action}/{action_input}/{observation} peut se répéter)
{thought}: je connais maintenant la réponse finale
{final_answer}: la réponse finale à la question initiale

Une seule {action} à la fois ; arrêtez-vous après son {action_input} : l'{observation} vous \
sera donnée. S'il manque une information que seul l'utilisateur connaît, utilisez ask_user.

{example}Commencez !""",
        history_header="Conversation jusqu'ici :",
        question="Question",
        user="Utilisateur",
        assistant="Assistant",
        no_history="",
        aliases={
            "thought": ("Réflexion",),
            "action_input": ("Entrée d'action", "Entrée d'Action", "Données d'entrée"),
            "final_answer": ("Réponse",),
        },
        corrections={
            "no_label": (
                "Format invalide : aucune ligne '{thought}:', '{action}:' ou '{final_answer}:'. "
                "Répondez par '{thought}: ...' puis soit '{action}: <l'un de [{tool_names}]>' et "
                "'{action_input}: <objet JSON>', soit '{final_answer}: <réponse>'."
            ),
            "no_decision": (
                "Format invalide : une {thought} sans {action} ni {final_answer}. Continuez avec "
                "'{action}: <l'un de [{tool_names}]>' et '{action_input}: <objet JSON>', ou "
                "'{final_answer}: <réponse>'."
            ),
            "no_tool": "Format invalide : '{action}:' doit être suivi d'un outil parmi [{tool_names}].",
            "no_input": (
                "Format invalide : '{action}: {tool}' doit être suivi d'une ligne "
                "'{action_input}: <objet JSON>' ({{}} si l'outil ne prend rien)."
            ),
            "empty_answer": "Format invalide : '{final_answer}:' doit être suivi de la réponse.",
        },
        budget_note=(
            "Le budget d'étapes est épuisé : plus d'actions. Donnez votre meilleure réponse finale "
            "à partir des observations ci-dessus, en disant ce qui reste incertain."
        ),
        example="""\
Un exemple de cycle complet (son outil, horaires_marees, n'est qu'un exemple : vous ne l'avez pas) :

Question : À quelle heure est la marée haute à Brest aujourd'hui ?
{thought}: Je vais utiliser un outil pour le trouver.
{action}: horaires_marees
{action_input}: {{"port": "Brest"}}
{observation}: Marée haute à Brest aujourd'hui : 06:12 et 18:37.
{thought}: L'observation répond à la question.
{final_answer}: La marée haute à Brest est à 06:12 et à 18:37 aujourd'hui.""",
        summary_system=("Vous résumez une conversation pour qu'elle puisse continuer sans son texte complet."),
        summary_request=(
            "Résumé jusqu'ici :\n{summary}\n\nCe qui a suivi :\n{conversation}\n\n"
            "Écrivez un seul résumé à jour de tout ce qui précède : les faits, les décisions, "
            "les questions ouvertes et ce que l'utilisateur a demandé. Recopiez exactement chaque "
            "nombre, nom et date. N'écrivez que le résumé."
        ),
        summary_header="Résumé de la conversation précédente :",
        steps_header="Résumé des étapes précédentes",
        recalled_header="Échanges antérieurs qui touchent à la question :",
    ),
    "ja": PromptPack(
        language="ja",
        labels=ReactLabels(
            thought="思考",
            action="行動",
            action_input="行動入力",
            observation="観察",
            final_answer="最終回答",
        ),
        instructions="""\
次の質問にできる限り答えてください。次のツールを使うことができます：

{tools}

次の形式を使ってください：

質問: 答えるべき入力の質問
{thought}: 何をすべきか常に考える
{action}: 取るべき行動。[{tool_names}] のいずれか
{action_input}: 行動への入力。ツールの入力スキーマに合う JSON オブジェクト
{observation}: 行動の結果
...（この {thought}/{action}/{action_input}/{observation} は繰り返すことができます）
{thought}: 最終回答がわかりました
{final_answer}: 元の質問への最終回答

{action} は一度に一つだけ書き、{action_input} の後で止めてください。{observation} は与えられます。\
ユーザーだけが知っている情報が足りないときは ask_user を使ってください。

{example}始めましょう！""",
        history_header="これまでの会話：",
        question="質問",
        user="ユーザー",
        assistant="アシスタント",
        no_history="",
        aliases={"thought": ("考え",), "final_answer": ("回答", "答え")},
        corrections={
            "no_label": (
                "形式が正しくありません：'{thought}:'、'{action}:'、'{final_answer}:' の行がありません。"
                "'{thought}: ...' の後に '{action}: <[{tool_names}] のいずれか>' と '{action_input}: <JSON>'、"
                "または '{final_answer}: <回答>' を書いてください。"
            ),
            "no_decision": (
                "形式が正しくありません：{thought} の後に {action} も {final_answer} もありません。"
                "'{action}: <[{tool_names}] のいずれか>' と '{action_input}: <JSON>'、"
                "または '{final_answer}: <回答>' を続けてください。"
            ),
            "no_tool": "形式が正しくありません：'{action}:' の後に [{tool_names}] のいずれかを書いてください。",
            "no_input": (
                "形式が正しくありません：'{action}: {tool}' の後に '{action_input}: <JSON>' の行が必要です"
                "（入力がなければ {{}}）。"
            ),
            "empty_answer": "形式が正しくありません：'{final_answer}:' の後に回答を書いてください。",
        },
        budget_note=(
            "ステップの上限に達しました。これ以上の行動はできません。上の観察から最善の最終回答を書き、"
            "不確かな点も述べてください。"
        ),
        example="""\
一回の流れの例（例のツール tide_times は例にすぎず、あなたは使えません）：

質問: 今日のブレストの満潮は何時ですか？
{thought}: ツールを使って調べます。
{action}: tide_times
{action_input}: {{"port": "ブレスト"}}
{observation}: 今日のブレストの満潮：06:12 と 18:37。
{thought}: 観察が質問に答えています。
{final_answer}: 今日のブレストの満潮は 06:12 と 18:37 です。""",
        summary_system="会話の全文がなくても続けられるように、会話を要約します。",
        summary_request=(
            "これまでの要約：\n{summary}\n\nその後の内容：\n{conversation}\n\n上のすべてを一つの最新の要約にまとめてください：事実、決定、未解決の質問、ユーザーの依頼。数字・名前・日付はそのまま正確に写してください。要約だけを書いてください。"
        ),
        summary_header="これまでの会話の要約：",
        steps_header="これまでのステップの要約",
        recalled_header="質問に関わる以前のやり取り：",
    ),
}


def get_pack(language: str | PromptPack) -> PromptPack:
    """The prompt pack for a language code (``en``, ``fr``, ``ja``)."""
    if isinstance(language, PromptPack):
        return language
    try:
        return PACKS[language]
    except KeyError:
        raise ValueError(f"no prompt pack for language {language!r}; available: {sorted(PACKS)}") from None
